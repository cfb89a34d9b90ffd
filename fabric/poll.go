package fabric

import (
	"context"
	"runtime"
	"time"
)

// Await returns the next completion of cq, blocking without spinning:
// poll, arm, poll again (closing the race), then wait for the event.
func Await(ctx context.Context, cq CQ) (WC, error) { return AwaitBusy(ctx, cq, 0) }

// AwaitBusy is Await that first keeps polling an empty cq for up to
// busy (Spin) before it sleeps on the completion channel.
func AwaitBusy(ctx context.Context, cq CQ, busy time.Duration) (WC, error) {
	var wc [1]WC
	for {
		n, err := cq.Poll(wc[:])
		if err != nil {
			return WC{}, err
		}
		if n == 0 && busy > 0 {
			n, err = Spin(ctx, cq, wc[:], busy)
			if err != nil {
				return WC{}, err
			}
		}
		if n == 1 {
			return wc[0], nil
		}
		if err := cq.Arm(); err != nil {
			return WC{}, err
		}
		n, err = cq.Poll(wc[:])
		if err != nil {
			return WC{}, err
		}
		if n == 1 {
			return wc[0], nil
		}
		if err := cq.Wait(ctx); err != nil {
			return WC{}, err
		}
	}
}

// Spinner is a CQ that can poll itself repeatedly for up to d in one
// call, returning as soon as it has completions (verbs: in C).
type Spinner interface {
	SpinPoll(wc []WC, d time.Duration) (int, error)
}

// SpinCounter is a CQ that counts the time spent polling it in vain:
// the CPU a busy-polling loop spent waiting, which its process's CPU
// time cannot tell from work. A Spinner counts its own stretches' vain
// polls (verbs: by the C clock, up to the poll that found completions);
// Spin and SpinOne add the rest of their polls that found nothing
// (AddSpun; see spinCounted), and a provider's own loops (Echoer,
// Pinger) their waits for completions.
type SpinCounter interface {
	Spun() time.Duration
	AddSpun(time.Duration)
}

// SpinSlice bounds one Spinner call of SpinOne: under 20 µs, sysmon's
// shortest period, so Go's runtime never takes the processor from a
// goroutine spinning in C (which on a busy machine wakes another thread,
// and the spinner then waits for it on the way back).
const SpinSlice = 15 * time.Microsecond

// SpinOne is Spin for the only loop that polls in its process: on a
// Spinner it polls in SpinSlice stretches inside the provider, yielding
// between them.
func SpinOne(ctx context.Context, cq CQ, wc []WC, busy time.Duration) (int, error) {
	sp, ok := cq.(Spinner)
	if !ok {
		return Spin(ctx, cq, wc, busy)
	}
	return spinCounted(ctx, cq, busy, func() (int, error) { return sp.SpinPoll(wc, SpinSlice) })
}

// spinCounted is spin on a CQ that may count its vain polls
// (SpinCounter): a stretch (a Spinner's call) counts its own vain part,
// and the rest of each call that found nothing is added. The yields
// between calls are not: there the processor may run other goroutines,
// and N loops sharing a few CPUs would otherwise count N times the wall
// time (a server's 40 busy-polled loops on the sim counted 15 cores
// while its process used 0.4). So the count approximates the CPU spent
// polling in vain, not the wait.
func spinCounted(ctx context.Context, cq CQ, busy time.Duration, poll func() (int, error)) (int, error) {
	sc, ok := cq.(SpinCounter)
	if !ok {
		return spin(ctx, busy, poll, nil)
	}
	var before, extra time.Duration
	n, err := spin(ctx, busy, func() (int, error) {
		before = sc.Spun()
		return poll()
	}, func(d time.Duration) {
		extra += max(d-(sc.Spun()-before), 0)
	})
	sc.AddSpun(extra)
	return n, err
}

// Spin polls an empty cq for completions into wc for up to busy, and
// returns as soon as there are some (0: none came, or ctx ended). It
// yields the processor between polls (runtime.Gosched), so the
// process's other goroutines still run. This is busy polling, as
// perftest's latency tools do, for a loop that found its CQ empty just
// after its last completions: a completion that comes within busy is
// taken without the completion channel's event and the wake-ups behind
// it (in the TCG guest an event costs ib_send_lat 4x its busy-polled
// latency), at the price of a CPU kept busy for busy after each one.
//
// On a SpinCounter the vain part of the wait is counted (spinCounted).
func Spin(ctx context.Context, cq CQ, wc []WC, busy time.Duration) (int, error) {
	return spinCounted(ctx, cq, busy, func() (int, error) { return cq.Poll(wc) })
}

// spin calls poll until it finds completions, fails, ctx ends or busy
// has passed, yielding between calls. With vain (not nil) it tells vain
// how long each call that found nothing took.
func spin(ctx context.Context, busy time.Duration, poll func() (int, error), vain func(time.Duration)) (int, error) {
	t0 := time.Now()
	until := t0.Add(busy)
	for {
		n, err := poll()
		if n > 0 || err != nil {
			return n, err
		}
		now := time.Now()
		if vain != nil {
			vain(now.Sub(t0))
		}
		if ctx.Err() != nil || !now.Before(until) {
			return 0, nil
		}
		runtime.Gosched()
		if vain != nil {
			t0 = time.Now()
		}
	}
}
