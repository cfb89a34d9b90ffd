package softroce

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/internal/parts"
)

func TestModuleLoadOrder(t *testing.T) {
	f, err := os.Open("../testdata/softroce/modules.dep")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	deps, err := parseModulesDep(f)
	if err != nil {
		t.Fatal(err)
	}
	order, err := deps.loadOrder(append([]string{"crc32c_intel_builtin"}, guestModules...), map[string]bool{"crc32c_intel_builtin": true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range order {
		names = append(names, moduleName(p))
	}
	want := []string{
		"crc32_generic",
		"virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_ring", "virtio", "virtio_pci",
		"virtio_console",
		"ib_core", "ib_uverbs", "ip6_udp_tunnel", "udp_tunnel", "rdma_rxe",
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("load order\n got %v\nwant %v", names, want)
	}
	// Every module comes after all of its dependencies.
	pos := map[string]int{}
	for i, p := range order {
		pos[p] = i
	}
	for _, p := range order {
		for _, d := range deps[p] {
			if pos[d] >= pos[p] {
				t.Errorf("%s loads before its dependency %s", p, d)
			}
		}
	}
}

func TestModuleLoadOrderErrors(t *testing.T) {
	cases := map[string]struct {
		dep   string
		roots []string
	}{
		"missing root":  {"a.ko:\n", []string{"b"}},
		"missing dep":   {"a.ko: b.ko\n", []string{"a"}},
		"cycle":         {"a.ko: b.ko\nb.ko: a.ko\n", []string{"a"}},
		"malformed dep": {"a.ko b.ko\n", []string{"a"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			deps, err := parseModulesDep(strings.NewReader(c.dep))
			if err == nil {
				_, err = deps.loadOrder(c.roots, nil)
			}
			if err == nil {
				t.Fatal("no error")
			}
		})
	}
	if got := moduleName("kernel/drivers/x/foo-bar.ko.xz"); got != "foo_bar" {
		t.Errorf("moduleName = %q", got)
	}
}

func TestCpioRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := newCpioWriter(&buf)
	entries := []cpioEntry{
		{name: "dev", mode: cpioDir | 0o755},
		{name: "dev/console", mode: cpioChr | 0o600, rdevMj: 5, rdevMn: 1},
		{name: "init", mode: cpioReg | 0o755, data: []byte("#!x\n")},
		{name: "lib", mode: cpioSymlink | 0o777, data: []byte("usr/lib")},
		{name: "odd", mode: cpioReg | 0o644, data: []byte("12345")},
	}
	for _, e := range entries {
		if err := w.add(e); err != nil {
			t.Fatal(err)
		}
	}
	w.add(cpioEntry{name: "/init", mode: cpioReg}) // duplicate: ignored
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len()%4 != 0 {
		t.Errorf("archive length %d not 4-aligned", buf.Len())
	}
	got, err := readCpio(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalize(got), normalize(entries)) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, entries)
	}
	// GNU cpio, when installed, is an independent reader of the format.
	if _, err := exec.LookPath("cpio"); err == nil {
		cmd := exec.Command("cpio", "-itv", "--quiet")
		cmd.Stdin = bytes.NewReader(buf.Bytes())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cpio -t: %v\n%s", err, out)
		}
		for _, want := range []string{"crw-------", "5,   1", "dev/console", "lib -> usr/lib", "init"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("cpio -tv output lacks %q:\n%s", want, out)
			}
		}
	}
}

func normalize(es []cpioEntry) []cpioEntry {
	out := append([]cpioEntry(nil), es...)
	for i := range out {
		if len(out[i].data) == 0 {
			out[i].data = nil
		}
	}
	return out
}

func TestLibResolverMatchesLdd(t *testing.T) {
	bin, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		parts.Missing(t, "ibv_devinfo not installed (Debian package ibverbs-utils)")
	}
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		t.Skipf("ldd: %v", err)
	}
	lr := newLibResolver("/")
	got, err := lr.closure([]string{bin})
	if err != nil {
		t.Fatal(err)
	}
	gotBase := map[string]bool{}
	for _, p := range got {
		gotBase[filepath.Base(p)] = true
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "linux-vdso") {
			continue
		}
		if !gotBase[filepath.Base(f[0])] {
			t.Errorf("ldd lists %s, resolver missed it (got %v)", f[0], got)
		}
	}
}

func TestLibResolverFixture(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n# comment\n/opt/a\n")
	write("/etc/ld.so.conf.d/x.conf", "/opt/b # trailing\n")
	write("/opt/b/libfoo.so.1", "")
	lr := newLibResolver(root)
	if lr.dirs[0] != "/opt/b" || lr.dirs[1] != "/opt/a" {
		t.Errorf("search dirs %v: want /opt/b then /opt/a first", lr.dirs)
	}
	if p, err := lr.find("libfoo.so.1", nil); err != nil || p != "/opt/b/libfoo.so.1" {
		t.Errorf("find libfoo = %q, %v", p, err)
	}
	if _, err := lr.find("libnone.so", nil); err == nil || !strings.Contains(err.Error(), "libnone.so") {
		t.Errorf("missing library error: %v", err)
	}
}

func TestPlanMirrorsSymlinks(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "usr/lib/x"), 0o755)
	os.WriteFile(filepath.Join(root, "usr/lib/x/libz.so.1.2"), []byte("z"), 0o644)
	os.Symlink("libz.so.1.2", filepath.Join(root, "usr/lib/x/libz.so.1"))
	os.Symlink("usr/lib", filepath.Join(root, "lib"))
	p := newPlan(root)
	if err := p.hostPath("/lib/x/libz.so.1"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/lib":                   "symlink usr/lib",
		"/usr":                   "dir",
		"/usr/lib":               "dir",
		"/usr/lib/x":             "dir",
		"/usr/lib/x/libz.so.1":   "symlink libz.so.1.2",
		"/usr/lib/x/libz.so.1.2": "file",
	}
	got := map[string]string{}
	for g, e := range p.entries {
		switch e.mode &^ 0o7777 {
		case cpioDir:
			got[g] = "dir"
		case cpioSymlink:
			got[g] = "symlink " + string(e.data)
		case cpioReg:
			got[g] = "file"
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plan\n got %v\nwant %v", got, want)
	}
}

func TestBuildImageCache(t *testing.T) {
	if _, err := newestRxeKernel("/"); err != nil {
		parts.Missing(t, "%v", err)
	}
	if _, err := os.Stat("/etc/libibverbs.d/rxe.driver"); err != nil {
		parts.Missing(t, "ibverbs-providers not installed")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	ctx := context.Background()
	cfg := ImageConfig{Binary: exe, CacheDir: cache}
	img, err := BuildImage(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if img.Cached {
		t.Error("first build reported a cache hit")
	}
	again, err := BuildImage(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cached || again.Initrd != img.Initrd {
		t.Errorf("second build: cached=%v %s vs %s", again.Cached, again.Initrd, img.Initrd)
	}
	// Same content under another name is still a hit: the key is content.
	other := filepath.Join(t.TempDir(), "renamed")
	copyFile(t, exe, other, nil)
	if r, err := BuildImage(ctx, ImageConfig{Binary: other, CacheDir: cache}); err != nil || !r.Cached {
		t.Errorf("renamed binary: cached=%v err=%v", r.Cached, err)
	}
	copyFile(t, exe, other, []byte("x"))
	changed, err := BuildImage(ctx, ImageConfig{Binary: other, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if changed.Cached || changed.Initrd == img.Initrd {
		t.Errorf("changed binary reused %s", changed.Initrd)
	}

	f, err := os.Open(img.Initrd)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ents, err := readCpio(f)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]cpioEntry{}
	for _, e := range ents {
		byName["/"+e.name] = e
	}
	for _, want := range []string{"/init", "/dev/console", "/dev/null", "/etc/libibverbs.d/rxe.driver", guestModuleList, "/lib64/ld-linux-x86-64.so.2", "/tmp", "/proc", "/sys"} {
		if _, ok := resolveIn(byName, want); !ok {
			t.Errorf("image lacks %s", want)
		}
	}
	if c := byName["/dev/console"]; c.mode&^0o7777 != cpioChr || c.rdevMj != 5 || c.rdevMn != 1 {
		t.Errorf("/dev/console is %+v, want char 5:1", c)
	}
	var provider bool
	for n := range byName {
		provider = provider || strings.Contains(n, "libibverbs/librxe-rdmav")
	}
	if !provider {
		t.Error("image lacks the rxe provider library")
	}
	mods := strings.Fields(string(byName[guestModuleList].data))
	if len(mods) == 0 || moduleName(mods[0]) != "crc32_generic" || moduleName(mods[len(mods)-1]) != "rdma_rxe" {
		t.Errorf("module order %v", mods)
	}
	for _, m := range mods {
		if e, ok := resolveIn(byName, m); !ok || e.mode&^0o7777 != cpioReg {
			t.Errorf("module %s listed but not in the image", m)
		}
	}
}

// resolveIn looks p up in an archive the way the guest kernel would,
// following symlinks such as /lib64 → usr/lib64 component by component.
func resolveIn(byName map[string]cpioEntry, p string) (cpioEntry, bool) {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for i := 0; i < len(parts); i++ {
		next := filepath.Join(cur, parts[i])
		e, ok := byName[next]
		if !ok {
			return e, false
		}
		if e.mode&^0o7777 == cpioSymlink {
			target := string(e.data)
			if !filepath.IsAbs(target) {
				target = filepath.Join(cur, target)
			}
			rest := append([]string{target}, parts[i+1:]...)
			return resolveIn(byName, filepath.Join(rest...))
		}
		if i == len(parts)-1 {
			return e, true
		}
		cur = next
	}
	return cpioEntry{}, false
}

func copyFile(t *testing.T, src, dst string, extra []byte) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, append(b, extra...), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestBuildImageMissingKernel(t *testing.T) {
	old := hostRoot
	hostRoot = t.TempDir()
	defer func() { hostRoot = old }()
	_, err := BuildImage(context.Background(), ImageConfig{Binary: "/bin/true", CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "linux-image-amd64") {
		t.Errorf("err = %v, want one naming linux-image-amd64", err)
	}
}

func TestCodec(t *testing.T) {
	pr, pw := io.Pipe()
	lw := &lineWriter{w: pw}
	big := strings.Repeat("é\"\\\n", 1<<18) // 1.5 MB with every escape
	var wg sync.WaitGroup
	const senders, each = 4, 50
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				p, _ := marshalPayload(map[string]int{"s": s, "i": i})
				lw.send(response{ID: uint64(s + 1), Kind: kindProgress, Payload: p})
			}
		}(s)
	}
	go func() {
		wg.Wait()
		p, _ := marshalPayload(big)
		lw.send(response{ID: 9, Kind: kindResult, Payload: p})
		raw, _ := marshalPayload(json.RawMessage("{\n\"a\": 1\n}"))
		lw.send(response{ID: 10, Kind: kindResult, Payload: raw})
		lw.send(request{ID: 11, Op: "x"})
		pw.Close()
	}()
	lr := newLineReader(pr)
	next := map[uint64]int{}
	for n := 0; n < senders*each; n++ {
		var r response
		if err := lr.next(&r); err != nil {
			t.Fatal(err)
		}
		var v struct{ S, I int }
		if err := json.Unmarshal(r.Payload, &v); err != nil {
			t.Fatal(err)
		}
		if v.I != next[r.ID] {
			t.Fatalf("sender %d: got %d, want %d (interleaved or reordered)", r.ID, v.I, next[r.ID])
		}
		next[r.ID]++
	}
	var r response
	if err := lr.next(&r); err != nil {
		t.Fatal(err)
	}
	var s string
	if err := json.Unmarshal(r.Payload, &s); err != nil || s != big {
		t.Fatalf("big payload did not survive: %v", err)
	}
	if err := lr.next(&r); err != nil || string(r.Payload) != `{"a":1}` {
		t.Fatalf("raw payload with newlines: %s %v", r.Payload, err)
	}
	var req request
	if err := lr.next(&req); err != nil || req.Op != "x" {
		t.Fatalf("request: %+v %v", req, err)
	}
	if err := lr.next(&r); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if _, err := marshalPayload(json.RawMessage("{bad")); err == nil {
		t.Error("invalid raw payload accepted")
	}
}

func TestParsePingpong(t *testing.T) {
	b, err := os.ReadFile("../testdata/softroce/ibv_rc_pingpong.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParsePingpong(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"bytes": 8192000, "seconds": 0.17, "Mbit/sec": 385.82, "iters": 1000, "usec/iter": 169.86}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := ParsePingpong("Couldn't connect to 127.0.0.1:18515\n"); err == nil {
		t.Error("failure output parsed")
	}
}

func TestParsePerftestLat(t *testing.T) {
	b, err := os.ReadFile("../testdata/softroce/ib_write_lat.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParsePerftestLat(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"bytes": 2, "iterations": 1000, "t_min": 10.87, "t_max": 181.12, "t_typical": 16.30,
		"t_avg": 15.73, "t_stdev": 9.74, "99%": 38.69, "99.9%": 181.12}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

// The row perftest prints when its cycle counter was not calibrated
// (seen in the TCG guest) is ErrPerftestClock, so the run is repeated.
func TestParsePerftestLatUncalibrated(t *testing.T) {
	out := ` #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 2       1000          inf            inf          inf      	       inf         	-nan   		inf     		inf    
`
	if _, err := ParsePerftestLat(out); !errors.Is(err, ErrPerftestClock) {
		t.Errorf("err %v, want ErrPerftestClock", err)
	}
}

func TestParseDevinfoCaps(t *testing.T) {
	b, err := os.ReadFile("../testdata/softroce/ibv_devinfo-v.txt")
	if err != nil {
		t.Fatal(err)
	}
	caps := ParseDevinfoCaps(string(b))
	want := map[string]int64{"max_qp": 1048560, "max_cq": 1048576, "max_mr": 524287, "max_pd": 1048576, "max_srq": 917503, "phys_port_cnt": 1}
	for k, v := range want {
		if caps[k] != v {
			t.Errorf("%s = %d, want %d", k, caps[k], v)
		}
	}
	if _, ok := caps["max_mr_size"]; ok {
		t.Error("hex max_mr_size parsed as decimal")
	}
}

func TestVersionLess(t *testing.T) {
	in := []string{"6.10.0-1-amd64", "6.1.0-56-amd64", "5.10.0-30-amd64", "6.1.0-9-amd64"}
	sort.Slice(in, func(i, j int) bool { return versionLess(in[i], in[j]) })
	want := []string{"5.10.0-30-amd64", "6.1.0-9-amd64", "6.1.0-56-amd64", "6.10.0-1-amd64"}
	if !reflect.DeepEqual(in, want) {
		t.Errorf("got %v", in)
	}
}

func TestConsoleTail(t *testing.T) {
	var log bytes.Buffer
	c := newConsoleTail(&log)
	fmt.Fprint(c, "[    1.0] ok\n[    2.9] Kernel panic - not syncing: Attempted to ")
	if c.panicLine() != "" {
		t.Error("panic line reported before its end")
	}
	fmt.Fprint(c, "kill init!\r\n[    3.0] Kernel panic again\n")
	if got := c.panicLine(); got != "[    2.9] Kernel panic - not syncing: Attempted to kill init!" {
		t.Errorf("panic line %q", got)
	}
	if !strings.HasPrefix(log.String(), "[    1.0] ok\n") {
		t.Error("log not copied")
	}
	if got := c.lastLines(1); !strings.Contains(got, "panic again") {
		t.Errorf("lastLines = %q", got)
	}
}

func TestAvailable(t *testing.T) {
	ok, why := Available()
	if why == "" {
		t.Error("Available gave no reason")
	}
	t.Logf("available=%v: %s", ok, why)
}

// ib_send_bw's header names columns with spaces and other units.
func TestParsePerftestBW(t *testing.T) {
	out := `---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 4096       5000             72.04              71.94  		   0.018417
---------------------------------------------------------------------------------------
`
	got, err := ParsePerftest(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"bytes": 4096, "iterations": 5000, "BW peak": 72.04, "BW average": 71.94, "MsgRate": 0.018417}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if _, err := ParsePerftest(strings.Replace(out, "0.018417", "-nan", 1)); !errors.Is(err, ErrPerftestClock) {
		t.Errorf("nan message rate: %v, want ErrPerftestClock", err)
	}
	// Seen in CI: the clock estimate failed and every rate read zero.
	zero := strings.NewReplacer("72.04", "0.00", "71.94", "0.00", "0.018417", "0.000000").Replace(out)
	if _, err := ParsePerftest(zero); !errors.Is(err, ErrPerftestClock) {
		t.Errorf("zero rates: %v, want ErrPerftestClock", err)
	}
	if _, err := ParsePerftest(strings.Replace(out, "0.018417", "", 1)); err == nil || !strings.Contains(err.Error(), "4 values for 5 columns") {
		t.Errorf("short row: %v", err)
	}
}

// withIterations replaces a tool's -n or adds one, leaving the caller's
// slice alone.
func TestWithIterations(t *testing.T) {
	in := []string{"-F", "-s", "4096", "-n", "5000"}
	if got := strings.Join(withIterations(in, 300), " "); got != "-F -s 4096 -n 300" {
		t.Errorf("replaced: %s", got)
	}
	if in[4] != "5000" {
		t.Errorf("the caller's arguments changed: %v", in)
	}
	if got := strings.Join(withIterations([]string{"-F"}, 300), " "); got != "-F -n 300" {
		t.Errorf("added: %s", got)
	}
}
