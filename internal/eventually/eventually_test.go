package eventually

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestWithinReturnsOnceTheConditionHolds(t *testing.T) {
	var set atomic.Bool
	time.AfterFunc(30*time.Millisecond, func() { set.Store(true) })
	start := time.Now()
	if !Within(time.Minute, set.Load) {
		t.Fatal("condition held, Within said it did not")
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("returned after %v for a condition that held after 30 ms", d)
	}
}

func TestWithinGivesUp(t *testing.T) {
	calls := 0
	start := time.Now()
	if Within(50*time.Millisecond, func() bool { calls++; return false }) {
		t.Fatal("a condition that never holds held")
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("gave up after %v, before its 50 ms", d)
	}
	if calls < 2 {
		t.Errorf("condition polled %d times", calls)
	}
}

// True fails the test it is given, naming what it waited for.
func TestTrueFailsNamingTheCondition(t *testing.T) {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		True(rec, 10*time.Millisecond, "the moon is cheese", func() bool { return false })
	}()
	<-done
	if want := "timed out after 10ms waiting until the moon is cheese"; rec.msg != want {
		t.Errorf("failed with %q, want %q", rec.msg, want)
	}
}

// recorder stands in for a testing.TB whose Fatalf ends the goroutine.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
