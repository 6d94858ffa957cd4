// imagebuild writes a container image from directories and files, without a container
// engine: a docker-archive tarball (what `docker load`, `podman load`,
// `ctr images import` and `kind load image-archive` read, and what `crane push` or
// `skopeo copy docker-archive:` upload) and, on request, an OCI image layout.
//
// The image format is go-containerregistry's; this program only lays out the layers
// (tar members sorted by name, one timestamp, root ownership and 0755/0644 modes unless
// told otherwise) and the config, so that the same inputs give the same digest.
//
//	imagebuild --tag ghcr.io/tas-dev/tas-operator:v0.1.0 \
//	  --entrypoint /usr/local/bin/tas-operator --user 65532:65532 \
//	  --label org.opencontainers.image.version=v0.1.0 \
//	  --layer rootfs/ --layer target/release/tas-operator=/usr/local/bin/tas-operator \
//	  --chmod /tmp=1777 --chown /home/nonroot=65532:65532 \
//	  --out tas-operator.tar
//
// It prints `<tag> digest=<manifest digest> id=<config digest>` once the archive, read
// back, gives the digest of the image built in memory: the digest `crane push` of the
// archive gives (other clients write their own manifest for a docker-archive: same
// config and layers, so the same id, which is what `docker load` shows). With
// --oci-layout, also `oci-digest=`: the image there has OCI media types.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

type options struct {
	tag        string
	entrypoint []string
	user       string
	workdir    string
	platform   string
	created    int64
	env        []string
	labels     map[string]string
	layers     []layerSpec
	headers    headers
	out        string
	ociLayout  string
	gzipLevel  int
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "imagebuild: %v\n", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	o := options{
		labels:  map[string]string{},
		headers: headers{owner: map[string]owner{}, mode: map[string]int64{}},
	}
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	fs.StringVar(&o.tag, "tag", "", "image reference repository:tag (required)")
	fs.Func("entrypoint", "entrypoint argument; repeat for more", func(s string) error {
		o.entrypoint = append(o.entrypoint, s)
		return nil
	})
	fs.StringVar(&o.user, "user", "", "user[:group] the image runs as")
	fs.StringVar(&o.workdir, "workdir", "", "working directory")
	fs.StringVar(&o.platform, "platform", "linux/amd64", "os/arch[/variant] of the image")
	fs.Int64Var(&o.created, "created", sourceDateEpoch(),
		"creation time and every file's mtime, Unix seconds (default $SOURCE_DATE_EPOCH, else 0)")
	fs.Func("env", "KEY=VALUE in the image's environment; repeat for more", func(s string) error {
		if !strings.Contains(s, "=") {
			return errors.New("want KEY=VALUE")
		}
		o.env = append(o.env, s)
		return nil
	})
	fs.Func("label", "KEY=VALUE label; repeat for more", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return errors.New("want KEY=VALUE")
		}
		o.labels[k] = v
		return nil
	})
	fs.Func("layer", "DIR (its tree from the image root) or FILE=/path; one layer each, in order", func(s string) error {
		spec, err := parseLayer(s)
		o.layers = append(o.layers, spec)
		return err
	})
	fs.Func("chown", "/path=UID:GID for that member of any layer (default 0:0)", func(s string) error {
		p, ids, ok := strings.Cut(s, "=")
		u, g, ok2 := strings.Cut(ids, ":")
		uid, err1 := strconv.Atoi(u)
		gid, err2 := strconv.Atoi(g)
		if !ok || !ok2 || err1 != nil || err2 != nil {
			return errors.New("want /path=UID:GID")
		}
		o.headers.owner[clean(p)] = owner{uid, gid}
		return nil
	})
	fs.Func("chmod", "/path=MODE (octal) for that member of any layer", func(s string) error {
		p, m, ok := strings.Cut(s, "=")
		mode, err := strconv.ParseInt(m, 8, 64)
		if !ok || err != nil {
			return errors.New("want /path=MODE in octal")
		}
		o.headers.mode[clean(p)] = mode
		return nil
	})
	fs.StringVar(&o.out, "out", "", "docker-archive tarball to write (required)")
	fs.StringVar(&o.ociLayout, "oci-layout", "", "also add the image to this OCI image layout directory")
	fs.IntVar(&o.gzipLevel, "gzip-level", 6, "gzip level of the layers (1 fastest, 9 smallest)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.tag == "" || o.out == "":
		return o, errors.New("--tag and --out are required")
	case len(o.layers) == 0:
		return o, errors.New("at least one --layer is needed")
	}
	o.headers.mtime = time.Unix(o.created, 0).UTC()
	return o, nil
}

func sourceDateEpoch() int64 {
	s, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		return 0
	}
	return s
}

func run(o options) error {
	tag, err := name.NewTag(o.tag, name.WeakValidation)
	if err != nil {
		return err
	}
	layers, err := compressedLayers(o)
	if err != nil {
		return err
	}
	// Docker media types in the archive: a docker-archive has no manifest, and the
	// clients that push one (crane) write these types; the digest is the one they push.
	img, err := image(o, layers, empty.Image, types.DockerLayer)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(o.out, tag, img); err != nil {
		return fmt.Errorf("writing %s: %w", o.out, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	back, err := tarball.ImageFromPath(o.out, &tag)
	if err != nil {
		return fmt.Errorf("reading %s back: %w", o.out, err)
	}
	if d, err := back.Digest(); err != nil || d != digest {
		return fmt.Errorf("%s read back gives digest %v (%v), not %v", o.out, d, err, digest)
	}
	id, err := img.ConfigName()
	if err != nil {
		return err
	}
	fmt.Printf("%s digest=%s id=%s", tag, digest, id)
	// OCI media types in an OCI layout (skopeo reads no other): the same config and
	// layers under another manifest, so another digest.
	if o.ociLayout != "" {
		base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		oci, err := image(o, layers, base, types.OCILayer)
		if err != nil {
			return err
		}
		if err := appendToLayout(o.ociLayout, tag, oci); err != nil {
			return fmt.Errorf("OCI layout %s: %w", o.ociLayout, err)
		}
		d, err := oci.Digest()
		if err != nil {
			return err
		}
		fmt.Printf(" oci-digest=%s", d)
	}
	fmt.Println()
	return nil
}

// compressedLayers tars and gzips each layer once.
func compressedLayers(o options) ([]v1.Layer, error) {
	layers := make([]v1.Layer, 0, len(o.layers))
	for _, spec := range o.layers {
		raw, err := tarLayer(spec, o.headers)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", spec.src, err)
		}
		opener := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
		layer, err := tarball.LayerFromOpener(opener, tarball.WithCompressionLevel(o.gzipLevel), tarball.WithCompressedCaching)
		if err != nil {
			return nil, err
		}
		layers = append(layers, layer)
	}
	return layers, nil
}

// image stacks the layers on base, as layerType, and sets the config.
func image(o options, layers []v1.Layer, base v1.Image, layerType types.MediaType) (v1.Image, error) {
	created := v1.Time{Time: o.headers.mtime}
	img := base
	for i, layer := range layers {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     layer,
			MediaType: layerType,
			History:   v1.History{Created: created, CreatedBy: o.layers[i].describe()},
		})
		if err != nil {
			return nil, err
		}
	}
	platform, err := v1.ParsePlatform(o.platform)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Created = created
	cfg.OS, cfg.Architecture, cfg.Variant = platform.OS, platform.Architecture, platform.Variant
	cfg.Config.Entrypoint = o.entrypoint
	cfg.Config.User = o.user
	cfg.Config.WorkingDir = o.workdir
	cfg.Config.Env = o.env
	cfg.Config.Labels = o.labels
	return mutate.ConfigFile(img, cfg)
}

// appendToLayout adds the image to an OCI layout, created if missing, replacing an
// image of the same name; annotated with the full name, as ref.name (skopeo's
// `oci:DIR:NAME`: the three images share one tag) and for containerd's import.
func appendToLayout(dir string, tag name.Tag, img v1.Image) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return err
		}
	}
	annotations := map[string]string{
		"org.opencontainers.image.ref.name": tag.String(),
		"io.containerd.image.name":          tag.String(),
	}
	if err := p.RemoveDescriptors(func(d v1.Descriptor) bool {
		return d.Annotations["io.containerd.image.name"] == tag.String()
	}); err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(annotations))
}
