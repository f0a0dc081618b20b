package httpapi

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// A body is read whole whether it declares its length, declares none, or
// declares one it does not have.
func TestABodyIsReadWholeWhateverLengthItDeclares(t *testing.T) {
	body := strings.Repeat(`{"message":"x"}`, 50)
	for _, declared := range []int64{-1, 0, 1, int64(len(body)) - 1, int64(len(body)), int64(len(body)) + 1, 4 * int64(len(body))} {
		got, err := readAll(iotest.HalfReader(strings.NewReader(body)), declared)
		if err != nil || string(got) != body {
			t.Errorf("declaring %d bytes: read %d bytes, %v; want the %d bytes", declared, len(got), err, len(body))
		}
	}
}

func TestAFailedReadOfABodyReportsItsError(t *testing.T) {
	broken := errors.New("connection reset")
	for _, declared := range []int64{-1, 10} {
		got, err := readAll(io.MultiReader(bytes.NewReader([]byte("{}")), iotest.ErrReader(broken)), declared)
		if !errors.Is(err, broken) {
			t.Errorf("declaring %d bytes: read %q, %v; want %v", declared, got, err, broken)
		}
	}
}
