package softroce

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// OpPutFiles writes files into the running guest: what exists only after
// boot, such as a server binary built on the host for one client count.
// It answers with the paths it created, for OpRemoveFiles, and the
// files sent by their sum alone that it did not have (PutAnswer).
const OpPutFiles = "put-files"

// OpRemoveFiles removes paths from the guest, the last first: what an
// OpPutFiles created, so a guest that runs share is left as it was.
const OpRemoveFiles = "remove-files"

// File is one file, directory or symlink to create in the guest, at the
// same absolute path it has on the host.
type File struct {
	Path string      `json:"path"`
	Mode fs.FileMode `json:"mode"`
	Data []byte      `json:"data,omitempty"` // file content, or a symlink's target
	// Sum (SHA-256, hex) and Size stand for a regular file's Data: the
	// guest keeps the file at Path, or copies its own program, if that
	// has this content, and otherwise answers that it needs the data.
	Sum  string `json:"sum,omitempty"`
	Size int64  `json:"size,omitempty"`
}

// PutAnswer is OpPutFiles' answer: the paths it created, and the
// indexes of the files sent by Sum that it needs the data of.
type PutAnswer struct {
	Created []string `json:"created"`
	Need    []int    `json:"need,omitempty"`
}

// HostFiles lists what the guest needs to run or read the host paths
// given: each path as the host has it (symlinked directories stay
// symlinks), a directory with everything under it, and the shared
// libraries and #! interpreters of the programs among them.
func HostFiles(paths []string) ([]File, error) {
	p := newPlan(hostRoot)
	var elfs []string
	for _, hp := range paths {
		abs, err := filepath.Abs(hp)
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(filepath.Join(hostRoot, abs))
		if err != nil {
			return nil, fmt.Errorf("file for the guest: %w", err)
		}
		var e []string
		if fi.IsDir() {
			e, err = p.tree(abs)
		} else {
			e, err = p.program(abs, 0)
		}
		if err != nil {
			return nil, err
		}
		elfs = append(elfs, e...)
	}
	libs, err := newLibResolver(hostRoot).closure(elfs)
	if err != nil {
		return nil, err
	}
	for _, l := range libs {
		if err := p.hostPath(l); err != nil {
			return nil, err
		}
	}
	var out []File
	for _, g := range sortedKeys(p.entries) {
		e := p.entries[g]
		f := File{Path: g, Data: e.data}
		switch e.mode &^ 0o7777 {
		case cpioDir:
			f.Mode = fs.ModeDir | fs.FileMode(e.mode&0o7777)
		case cpioSymlink:
			f.Mode = fs.ModeSymlink | 0o777
		case cpioReg:
			f.Mode = fs.FileMode(e.mode & 0o7777)
			b, err := os.ReadFile(e.src)
			if err != nil {
				return nil, err
			}
			f.Data = b
		default:
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

// PutFiles writes files into the guest (see OpPutFiles) and returns the
// paths it created: those that were not there before. Regular files go
// by their sum first, and their data only where the guest lacks them:
// data crosses the agent's channel slowly, and the libraries a program
// needs are mostly in the image already, as rdmaprobe's own binary is
// the guest's program.
func (g *Guest) PutFiles(ctx context.Context, files []File) ([]string, error) {
	return putBySum(files, func(files []File) (PutAnswer, error) { return g.putFiles(ctx, files) })
}

// putBySum puts files with put twice: each regular file by its sum,
// then the data of those the first put answers it needs.
func putBySum(files []File, put func([]File) (PutAnswer, error)) ([]string, error) {
	bySum := make([]File, len(files))
	for i, f := range files {
		bySum[i] = f
		if f.Mode.IsRegular() {
			sum := sha256.Sum256(f.Data)
			bySum[i].Data, bySum[i].Sum, bySum[i].Size = nil, hex.EncodeToString(sum[:]), int64(len(f.Data))
		}
	}
	first, err := put(bySum)
	if err != nil || len(first.Need) == 0 {
		return first.Created, err
	}
	need := make([]File, 0, len(first.Need))
	for _, i := range first.Need {
		if i < 0 || i >= len(files) {
			return first.Created, fmt.Errorf("%s: the guest needs file %d of %d", OpPutFiles, i, len(files))
		}
		need = append(need, files[i])
	}
	then, err := put(need)
	return append(first.Created, then.Created...), err
}

func (g *Guest) putFiles(ctx context.Context, files []File) (PutAnswer, error) {
	var a PutAnswer
	raw, err := g.Call(ctx, OpPutFiles, files, nil)
	if err != nil {
		return a, err
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("%s: the guest's answer: %w", OpPutFiles, err)
	}
	return a, nil
}

// RemoveFiles removes paths from the guest, the last first (see
// OpRemoveFiles).
func (g *Guest) RemoveFiles(ctx context.Context, paths []string) error {
	_, err := g.Call(ctx, OpRemoveFiles, paths, nil)
	return err
}

// applyFiles creates files under root in order (parents come first in
// HostFiles' sorted list) and returns the paths that were not there
// before. What already exists as a directory, or as a symlink (the
// image's /lib → usr/lib), is kept; a regular file is replaced whole
// through a rename, so a program running from the old one keeps its
// copy. A regular file sent by its Sum is kept if the one at its path
// has that content and mode, copied from this program if that has the
// content, and otherwise left for a second put with its data (Need).
func applyFiles(root string, files []File) (PutAnswer, error) {
	a := PutAnswer{Created: []string{}}
	for i, f := range files {
		if !cleanAbs(f.Path) {
			return a, fmt.Errorf("put %q: not a clean absolute path", f.Path)
		}
		dst := filepath.Join(root, f.Path)
		_, err := os.Lstat(dst)
		existed := err == nil
		switch {
		case f.Mode.IsDir():
			if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
				continue
			}
			if err := os.MkdirAll(dst, f.Mode.Perm()); err != nil {
				return a, fmt.Errorf("put %s: %w", f.Path, err)
			}
		case f.Mode&fs.ModeSymlink != 0:
			if cur, err := os.Readlink(dst); err == nil && cur == string(f.Data) {
				continue
			}
			os.Remove(dst)
			if err := os.Symlink(string(f.Data), dst); err != nil {
				return a, fmt.Errorf("put %s: %w", f.Path, err)
			}
		case f.Mode.IsRegular():
			if f.Sum != "" {
				if existed && sameFile(dst, f, true) {
					continue
				}
				self, err := os.Executable()
				if err != nil || !sameFile(self, f, false) {
					a.Need = append(a.Need, i)
					continue
				}
				if f.Data, err = os.ReadFile(self); err != nil {
					return a, fmt.Errorf("put %s: %w", f.Path, err)
				}
			}
			tmp := dst + ".rdmaprobe-put"
			if err := os.WriteFile(tmp, f.Data, f.Mode.Perm()); err != nil {
				return a, fmt.Errorf("put %s: %w", f.Path, err)
			}
			// WriteFile's mode is filtered by the umask; the guest must
			// see the host's bits (an executable stays executable).
			os.Chmod(tmp, f.Mode.Perm())
			if err := os.Rename(tmp, dst); err != nil {
				os.Remove(tmp)
				return a, fmt.Errorf("put %s: %w", f.Path, err)
			}
		default:
			return a, fmt.Errorf("put %s: unsupported mode %v", f.Path, f.Mode)
		}
		if !existed {
			a.Created = append(a.Created, f.Path)
		}
	}
	return a, nil
}

// sameFile says whether the regular file at p has f's Size and Sum,
// and with perm f's permission bits.
func sameFile(p string, f File, perm bool) bool {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != f.Size || (perm && fi.Mode().Perm() != f.Mode.Perm()) {
		return false
	}
	r, err := os.Open(p)
	if err != nil {
		return false
	}
	defer r.Close()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return false
	}
	return hex.EncodeToString(h.Sum(nil)) == f.Sum
}

// removeFiles removes paths under root, the last first, so a directory
// goes after what OpPutFiles created in it; one that holds anything
// else stays, and says so.
func removeFiles(root string, paths []string) error {
	var errs []error
	for i := len(paths) - 1; i >= 0; i-- {
		if !cleanAbs(paths[i]) || paths[i] == "/" {
			errs = append(errs, fmt.Errorf("remove %q: not a clean absolute path", paths[i]))
			continue
		}
		if err := os.Remove(filepath.Join(root, paths[i])); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func cleanAbs(p string) bool {
	return path.IsAbs(p) && !strings.Contains(p, "/../") && !strings.HasSuffix(p, "/..")
}

func decodeFiles(payload json.RawMessage) ([]File, error) {
	var files []File
	if err := json.Unmarshal(payload, &files); err != nil {
		return nil, fmt.Errorf("%s: %w", OpPutFiles, err)
	}
	if len(files) == 0 {
		return nil, errors.New(OpPutFiles + ": no files")
	}
	return files, nil
}
