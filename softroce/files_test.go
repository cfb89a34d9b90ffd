package softroce

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/internal/parts"
)

// TestHostFilesApply ships a target directory the way the vm backend
// does (a program, a #! script, data, a symlink) into a fresh root and
// checks that the programs' libraries and interpreter came along.
func TestHostFilesApply(t *testing.T) {
	prog, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		parts.Missing(t, "ibv_devinfo not installed (Debian package ibverbs-utils)")
	}
	dir := t.TempDir()
	copyFile(t, prog, filepath.Join(dir, "server"), nil)
	os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\nexec ./server\n"), 0o755)
	os.MkdirAll(filepath.Join(dir, "conf"), 0o700)
	os.WriteFile(filepath.Join(dir, "conf", "key.pem"), []byte("secret"), 0o600)
	os.Symlink("conf/key.pem", filepath.Join(dir, "key"))

	files, err := HostFiles([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]File{}
	for _, f := range files {
		byPath[f.Path] = f
	}
	for _, want := range []string{dir + "/server", dir + "/run.sh", dir + "/conf/key.pem", dir + "/key"} {
		if _, ok := byPath[want]; !ok {
			t.Errorf("HostFiles lacks %s", want)
		}
	}
	var verbs, sh, gcc bool
	for p, f := range byPath {
		verbs = verbs || strings.Contains(p, "libibverbs.so.1")
		gcc = gcc || strings.HasSuffix(p, "/libgcc_s.so.1")
		sh = sh || (strings.HasSuffix(p, "/dash") && f.Mode.IsRegular())
	}
	if !verbs {
		t.Error("HostFiles lacks the program's libibverbs.so.1")
	}
	if !sh {
		t.Error("HostFiles lacks the script's interpreter (/bin/sh → dash)")
	}
	if !gcc {
		t.Error("HostFiles lacks libgcc_s.so.1, which glibc dlopens for pthread_exit")
	}

	root := t.TempDir()
	put, err := applyFiles(root, files)
	if err != nil {
		t.Fatal(err)
	}
	created := put.Created
	if len(created) != len(files) {
		t.Errorf("into an empty root: %d paths created of %d", len(created), len(files))
	}
	check := func(key string) {
		t.Helper()
		fi, err := os.Stat(filepath.Join(root, dir, "server"))
		if err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("server in guest root: %v %v", fi, err)
		}
		fi, err = os.Stat(filepath.Join(root, dir, "conf"))
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("conf dir in guest root: %v %v", fi, err)
		}
		if b, err := os.ReadFile(filepath.Join(root, dir, "key")); err != nil || string(b) != key {
			t.Errorf("symlink key → %q, %v", b, err)
		}
		want, _ := os.ReadFile(prog)
		if got, _ := os.ReadFile(filepath.Join(root, dir, "server")); !bytes.Equal(got, want) {
			t.Error("server content differs")
		}
	}
	check("secret")
	// Again, with a changed file: existing directories and links are kept,
	// the file is replaced.
	for i := range files {
		if files[i].Path == dir+"/conf/key.pem" {
			files[i].Data = []byte("rotated")
		}
	}
	again, err := applyFiles(root, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Created) != 0 || len(again.Need) != 0 {
		t.Errorf("again: %+v, want nothing new", again)
	}
	check("rotated")
	if m, _ := filepath.Glob(filepath.Join(root, dir, "*.rdmaprobe-put")); len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}

	// What was created goes, the last first; a directory that holds
	// something else stays and says so.
	os.WriteFile(filepath.Join(root, dir, "conf", "other"), nil, 0o600)
	if err := removeFiles(root, created); err == nil {
		t.Error("a directory holding a file not created: no error")
	}
	var left []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if want := filepath.Join(root, dir, "conf", "other"); len(left) != 1 || left[0] != want {
		t.Errorf("left after removal %v, want only %s", left, want)
	}

	for _, bad := range []string{"relative/x", "/a/../../etc/x"} {
		if _, err := applyFiles(root, []File{{Path: bad, Mode: 0o644}}); err == nil {
			t.Errorf("put %q: no error", bad)
		}
	}
	if _, err := applyFiles(root, []File{{Path: "/dev-node", Mode: fs.ModeDevice}}); err == nil {
		t.Error("device node: no error")
	}
	if _, err := HostFiles([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("missing path: no error")
	}
}

// Regular files go by their sum first and their data only where the
// guest lacks them (as JSON, as the guest gets them): into a fresh root
// every file's data crosses; into the same root again none; then only
// that of a file whose content or mode changed; and a file with this
// program's content is copied from it, its data never sent.
func TestPutFilesBySum(t *testing.T) {
	root := t.TempDir()
	files := []File{
		{Path: "/put", Mode: fs.ModeDir | 0o755},
		{Path: "/put/a", Mode: 0o644, Data: []byte("alpha")},
		{Path: "/put/empty", Mode: 0o600},
		{Path: "/put/link", Mode: fs.ModeSymlink | 0o777, Data: []byte("a")},
	}
	var sent []string // the paths whose data crossed
	put := func(files []File) (PutAnswer, error) {
		b, err := json.Marshal(files)
		if err != nil {
			return PutAnswer{}, err
		}
		var got []File
		if err := json.Unmarshal(b, &got); err != nil {
			return PutAnswer{}, err
		}
		for _, f := range got {
			if f.Mode.IsRegular() && f.Sum == "" {
				sent = append(sent, f.Path)
			}
		}
		a, err := applyFiles(root, got)
		if err != nil {
			return a, err
		}
		b, err = json.Marshal(a)
		if err != nil {
			return a, err
		}
		var back PutAnswer
		return back, json.Unmarshal(b, &back)
	}
	step := func(name string, wantCreated, wantSent []string) {
		t.Helper()
		sent = nil
		created, err := putBySum(files, put)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(created, wantCreated) || !slices.Equal(sent, wantSent) {
			t.Errorf("%s: created %q, data sent for %q; want %q and %q", name, created, sent, wantCreated, wantSent)
		}
		for _, f := range files {
			if !f.Mode.IsRegular() {
				continue
			}
			fi, err := os.Stat(filepath.Join(root, f.Path))
			if b, _ := os.ReadFile(filepath.Join(root, f.Path)); err != nil || !bytes.Equal(b, f.Data) || fi.Mode().Perm() != f.Mode.Perm() {
				t.Errorf("%s: %s in the guest: %v, %d bytes, %v", name, f.Path, err, len(b), fi)
			}
		}
	}
	step("fresh", []string{"/put", "/put/link", "/put/a", "/put/empty"}, []string{"/put/a", "/put/empty"})
	step("again", nil, nil)
	files[1].Data = []byte("changed")
	step("changed", nil, []string{"/put/a"})
	files[2].Mode = 0o644
	step("mode", nil, []string{"/put/empty"})

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	prog, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, File{Path: "/put/prog", Mode: 0o755, Data: prog})
	step("this program", []string{"/put/prog"}, nil)
}

// TestImageExtraDirs builds an image with a target directory and checks
// the directory, the script's interpreter and the netdev module list.
func TestImageExtraDirs(t *testing.T) {
	if _, err := newestRxeKernel("/"); err != nil {
		t.Skip(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "start"), []byte("#!/bin/sh\necho hi\n"), 0o755)
	p, _, err := planImage(ImageConfig{Binary: exe, ExtraDirs: []string{dir}}, mustRelease(t))
	if err != nil {
		t.Fatal(err)
	}
	if e := p.entries[dir+"/start"]; e == nil || e.mode&0o111 == 0 {
		t.Errorf("image lacks executable %s/start: %+v", dir, e)
	}
	var sh bool
	for g, e := range p.entries {
		sh = sh || (strings.HasSuffix(g, "/dash") && e.mode&^0o7777 == cpioReg)
	}
	if !sh {
		t.Error("image lacks the script's interpreter (/bin/sh → dash)")
	}
	mods := strings.Fields(string(p.entries[netdevModList].data))
	var names []string
	for _, m := range mods {
		names = append(names, moduleName(m))
	}
	for _, want := range []string{"dummy", "rdma_cm", "rdma_ucm"} {
		if !contains(names, want) {
			t.Errorf("netdev module list %v lacks %s", names, want)
		}
	}
	if _, _, err := planImage(ImageConfig{Binary: exe, ExtraDirs: []string{filepath.Join(dir, "start")}}, mustRelease(t)); err == nil {
		t.Error("a file as ExtraDirs: no error")
	}
}

func mustRelease(t *testing.T) string {
	rel, err := newestRxeKernel("/")
	if err != nil {
		t.Skip(err)
	}
	return rel
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestNetdevModuleOrder(t *testing.T) {
	f, err := os.Open("../testdata/softroce/modules.dep")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	deps, err := parseModulesDep(f)
	if err != nil {
		t.Fatal(err)
	}
	order, err := deps.loadOrder(netdevModules, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range order {
		names = append(names, moduleName(p))
	}
	want := []string{"dummy", "ib_core", "ib_uverbs", "iw_cm", "ib_cm", "configfs", "rdma_cm", "rdma_ucm"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("netdev load order\n got %v\nwant %v", names, want)
	}
}

func TestIPv4MappedGID(t *testing.T) {
	if g := ipv4MappedGID("127.0.0.1"); g != rxeGID {
		t.Errorf("127.0.0.1 → %s, want rxe0's %s", g, rxeGID)
	}
	if g := ipv4MappedGID(NetdevAddr); g != "0000:0000:0000:0000:0000:ffff:c000:0201" {
		t.Errorf("%s → %s", NetdevAddr, g)
	}
	if g := ipv4MappedGID("fe80::1"); g != "" {
		t.Errorf("IPv6 → %q, want empty", g)
	}
}
