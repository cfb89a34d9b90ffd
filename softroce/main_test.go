package softroce

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/command"
)

// TestMain lets the test binary double as the guest's /init, so the real
// boot test exercises exactly the code an app binary runs in the guest.
// What the tests share is removed after them: the guest some of them
// share and the images their guests boot.
func TestMain(m *testing.M) {
	command.EnterViewIfAsked()
	if IsGuest() {
		GuestMain(testHandler)
	}
	code := m.Run()
	if shared.g != nil {
		shared.g.Close()
	}
	if imageCache.dir != "" {
		os.RemoveAll(imageCache.dir)
	}
	os.Exit(code)
}

// shared is the guest of the tests whose subject is not a boot
// (sharedGuest), booted by the first of them.
var shared struct {
	once sync.Once
	g    *Guest
	err  error
}

// imageCache is the image cache of this test binary's guests: one
// image (and one kernel extracted from its bzImage) serves every guest
// booted with the same contents.
var imageCache struct {
	once sync.Once
	dir  string
	err  error
}

// testHandler implements the ops the boot test needs beyond the built-ins.
func testHandler(ctx context.Context, op string, payload json.RawMessage, progress func(any)) (any, error) {
	switch op {
	case "count":
		var n int
		if err := json.Unmarshal(payload, &n); err != nil {
			return nil, err
		}
		for i := 1; i <= n; i++ {
			progress(map[string]int{"i": i})
		}
		return n, nil
	case "blob":
		// A JSON array of n small objects, the shape of a probe result.
		var n int
		if err := json.Unmarshal(payload, &n); err != nil {
			return nil, err
		}
		var b strings.Builder
		b.WriteByte('[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"client":%d,"outcome":"ok","rtt_us":%d.5,"phase":"connected-and-verified"}`, i, i%997)
		}
		b.WriteByte(']')
		return json.RawMessage(b.String()), nil
	case "raw":
		// A string of n bytes: the channel's own speed, little JSON work.
		var n int
		if err := json.Unmarshal(payload, &n); err != nil {
			return nil, err
		}
		return strings.Repeat("x", n), nil
	case "size":
		return len(payload), nil
	case "panic":
		panic("test handler panic")
	case "crash":
		// sysrq-c panics the kernel: the host must report it, not hang.
		return nil, os.WriteFile("/proc/sysrq-trigger", []byte("c"), 0o200)
	case "wait":
		<-ctx.Done()
		return nil, ctx.Err()
	case "capserver":
		var req capRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		return runCapserver(ctx, req)
	}
	return nil, fmt.Errorf("unknown op %q", op)
}
