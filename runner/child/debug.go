package child

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// DebugMemory is what `serve --debug-addr` answers at /debug/memory:
// the process's retained heap (live objects after a full collection)
// and the server's counters. A long-running server is judged by it
// over hours (`rdmaprobe bench soak`).
type DebugMemory struct {
	RetainedHeapBytes uint64             `json:"retained_heap_bytes"`
	HeapObjects       uint64             `json:"heap_objects"`
	Goroutines        int                `json:"goroutines"`
	Server            result.ServerStats `json:"server"`
}

// DebugLinePrefix starts the line in which serve says where its debug
// endpoint listens.
const DebugLinePrefix = "debug: http://"

// serveDebug serves /debug/memory and Go's /debug/pprof/ on addr until
// stop, and returns the address it listens on. srv is the server once it
// exists (nil before).
func serveDebug(addr string, srv func() *server.Server) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/memory", func(w http.ResponseWriter, r *http.Request) {
		// A collection first, so that the figure is what the process
		// keeps, not what it has not yet freed.
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		w.Header().Set("Content-Type", "application/json")
		m := DebugMemory{RetainedHeapBytes: ms.HeapAlloc, HeapObjects: ms.HeapObjects, Goroutines: runtime.NumGoroutine()}
		if s := srv(); s != nil {
			m.Server = s.Stats()
		}
		json.NewEncoder(w).Encode(m)
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.Serve(ln) // ends with ErrServerClosed at stop
	}()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		hs.Shutdown(sctx)
		hs.Close()
		<-done
	}
	return ln.Addr().String(), stop, nil
}
