package bench

import (
	"os"
	"testing"
)

func TestStatCPUCountsFieldsFromAfterTheCommandName(t *testing.T) {
	// A command name may hold spaces and parentheses.
	line := "4242 (post gres) (x)) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 130 0 0 20 0 1 0 100 1000 10"
	got, err := statCPU(line)
	if err != nil || got != 3.8 {
		t.Fatalf("statCPU = %v, %v; want 3.8 s (250 + 130 ticks)", got, err)
	}
	if _, err := statCPU("4242 (short) S 1 2"); err == nil {
		t.Error("a short stat line was read without an error")
	}
}

func TestProcCPUReadsThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this system")
	}
	if _, err := procCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, err := machineCPU(); err != nil {
		t.Fatal(err)
	}
}
