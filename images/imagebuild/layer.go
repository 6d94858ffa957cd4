package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// layerSpec is one layer: a directory tree laid out from the image root (dest empty),
// or one file placed at dest.
type layerSpec struct {
	src, dest string
}

func parseLayer(arg string) (layerSpec, error) {
	src, dest, isFile := strings.Cut(arg, "=")
	if src == "" || (isFile && dest == "") {
		return layerSpec{}, fmt.Errorf("--layer %q: want DIR or FILE=/path/in/image", arg)
	}
	if isFile {
		return layerSpec{src: src, dest: clean(dest)}, nil
	}
	return layerSpec{src: src}, nil
}

// describe is the layer's history line: image paths only, so that the history does not
// depend on where the build ran.
func (s layerSpec) describe() string {
	if s.dest == "" {
		return "imagebuild: directory tree"
	}
	return "imagebuild: file /" + s.dest
}

// owner is a uid:gid pair for --chown.
type owner struct{ uid, gid int }

// headers fixes what a layer's tar headers say beyond names and content, so that the
// same input gives the same bytes on any machine: one time, root ownership and
// 0755/0644 modes unless --chown/--chmod name the path.
type headers struct {
	mtime time.Time
	owner map[string]owner
	mode  map[string]int64
}

// entry is one tar member before its header is written.
type entry struct {
	name     string // image path without the leading slash
	typeflag byte
	src      string // regular files: where the content is read from
	size     int64
	link     string
	exec     bool
}

// tarLayer writes the layer's uncompressed tar: entries sorted by name, parents first.
func tarLayer(spec layerSpec, h headers) ([]byte, error) {
	var entries []entry
	var err error
	if spec.dest == "" {
		entries, err = walk(spec.src)
	} else {
		entries, err = single(spec.src, spec.dest)
	}
	if err != nil {
		return nil, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := writeEntry(tw, e, h); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeEntry(tw *tar.Writer, e entry, h headers) error {
	hdr := &tar.Header{
		Typeflag: e.typeflag,
		Name:     e.name,
		Linkname: e.link,
		ModTime:  h.mtime,
		Mode:     0o644,
	}
	switch {
	case e.typeflag == tar.TypeDir:
		hdr.Name += "/"
		hdr.Mode = 0o755
	case e.typeflag == tar.TypeSymlink:
		hdr.Mode = 0o777
	case e.exec:
		hdr.Mode = 0o755
	}
	if m, ok := h.mode[e.name]; ok {
		hdr.Mode = m
	}
	if o, ok := h.owner[e.name]; ok {
		hdr.Uid, hdr.Gid = o.uid, o.gid
	}
	if e.typeflag != tar.TypeReg {
		return tw.WriteHeader(hdr)
	}
	hdr.Size = e.size
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(tw, f)
	if err == nil && n != e.size {
		err = fmt.Errorf("%s changed size while being read", e.src)
	}
	return err
}

// walk lists a directory tree; its root is the image's root.
func walk(root string) ([]entry, error) {
	var entries []entry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e, err := fromInfo(filepath.ToSlash(rel), p, info)
		if err != nil {
			return err
		}
		entries = append(entries, e)
		return nil
	})
	return entries, err
}

// single is one file at dest plus the directories above it.
func single(src, dest string) ([]entry, error) {
	info, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", src)
	}
	var entries []entry
	for dir := path.Dir(dest); dir != "."; dir = path.Dir(dir) {
		entries = append(entries, entry{name: dir, typeflag: tar.TypeDir})
	}
	e, err := fromInfo(dest, src, info)
	return append(entries, e), err
}

func fromInfo(name, src string, info fs.FileInfo) (entry, error) {
	e := entry{name: name}
	switch mode := info.Mode(); {
	case mode.IsDir():
		e.typeflag = tar.TypeDir
	case mode&fs.ModeSymlink != 0:
		link, err := os.Readlink(src)
		if err != nil {
			return e, err
		}
		e.typeflag, e.link = tar.TypeSymlink, link
	case mode.IsRegular():
		e.typeflag, e.src, e.size = tar.TypeReg, src, info.Size()
		e.exec = mode&0o111 != 0
	default:
		return e, fmt.Errorf("%s: only directories, regular files and symlinks go into a layer", src)
	}
	return e, nil
}

// clean turns "/usr/local/bin/x" into the tar name "usr/local/bin/x".
func clean(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}
