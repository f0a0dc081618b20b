package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of the CPU times in /proc (USER_HZ), 100 on
// every Linux the bench runs on.
const clockTicks = 100

// procCPU reads a process's CPU time so far (user and system, from
// /proc/<pid>/stat), in seconds.
func procCPU(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return statCPU(string(data))
}

// statCPU parses utime and stime out of a /proc/<pid>/stat line. The
// command name, in parentheses, may hold spaces: the fields are counted
// from after its closing parenthesis.
func statCPU(line string) (float64, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", line)
	}
	f := strings.Fields(line[i+1:])
	// f[0] is the state (field 3); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat line %q", line)
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("utime/stime in %q", line)
	}
	return (u + s) / clockTicks, nil
}

// postgresCPU reads the CPU time so far of every process named postgres
// that this one can see (the server and its backends, when it runs on
// this machine), by process id.
func postgresCPU() map[int]float64 {
	out := map[int]float64{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if t, err := procCPU(pid); err == nil {
			out[pid] = t
		}
	}
	return out
}

// machineCPU reads the busy time of all processors so far, in seconds
// (every column of /proc/stat's cpu line but idle and iowait).
func machineCPU() (float64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("no cpu line in /proc/stat")
	}
	var busy float64
	// user nice system idle iowait irq softirq steal (guest time is
	// already in user).
	for i, v := range f[1:min(len(f), 9)] {
		if i == 3 || i == 4 {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		busy += n
	}
	return busy / clockTicks, nil
}

// cpuWatch measures, over one stretch of time, the processor use of some
// processes, of the PostgreSQL server and of the whole machine, each as a
// fraction of one core.
type cpuWatch struct {
	pids    []int
	start   time.Time
	procs   []float64
	pg      map[int]float64
	machine float64
	ok      bool
}

// cpuUse is what a cpuWatch measured, in cores.
type cpuUse struct {
	procs   []float64
	pg      float64 // the PostgreSQL server's processes; 0 when none are seen
	pgSeen  bool
	self    float64 // this process: the clients
	machine float64
}

func watchCPU(pids ...int) *cpuWatch {
	w := &cpuWatch{pids: append(pids, os.Getpid()), start: time.Now(), pg: postgresCPU(), ok: true}
	for _, p := range w.pids {
		t, err := procCPU(p)
		w.ok = w.ok && err == nil
		w.procs = append(w.procs, t)
	}
	m, err := machineCPU()
	w.machine, w.ok = m, w.ok && err == nil
	return w
}

// done ends the stretch. It reports false when /proc could not be read.
func (w *cpuWatch) done() (cpuUse, bool) {
	el := time.Since(w.start).Seconds()
	var u cpuUse
	ok := w.ok
	for i, p := range w.pids {
		t, err := procCPU(p)
		ok = ok && err == nil
		u.procs = append(u.procs, (t-w.procs[i])/el)
	}
	u.self, u.procs = u.procs[len(u.procs)-1], u.procs[:len(u.procs)-1]
	// A backend that started during the stretch counts from zero; one that
	// ended is lost (the pools keep theirs open).
	for pid, t := range postgresCPU() {
		u.pg += t - w.pg[pid]
		u.pgSeen = true
	}
	u.pg /= el
	m, err := machineCPU()
	u.machine = (m - w.machine) / el
	return u, ok && err == nil
}
