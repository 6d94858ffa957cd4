//! The images, both ways they are built: the archives of `make image-archives`
//! (`images/build.sh`, no container engine) and the Dockerfile of `make images`.
//!
//! The archives are built twice from the debug binaries cargo built for the tests
//! (`make image-archives` builds release ones; the script is the same) and must be
//! byte-identical. Each is read the way `docker load` reads it (manifest.json, its
//! config) and must carry exactly the name and tag `config/manager/` deploys, the user,
//! entrypoint and OCI labels below; its layers must hold no shell and no package
//! binaries, and, unpacked into a root of their own, run the entrypoint's `--version` as
//! the image's user: the libraries in the image are enough. The Dockerfile must set the
//! same user, entrypoint and labels per target.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;
use tas_nodesim::runner::Images;
use tas_nodesim::runner::images::TAS_IMAGES;

/// `nonroot` of the distroless base, and of the base `images/build.sh` assembles.
const USER: &str = "65532:65532";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// What either build must give an image.
struct Expected {
    reference: String,
    entrypoint: String,
    labels: BTreeMap<String, String>,
}

/// `ghcr.io/tas-dev/<name>:<newTag>` as config/manager/kustomization.yaml lists it, the
/// tag being the workspace version.
fn reference(name: &str) -> String {
    let path = repo().join("config/manager/kustomization.yaml");
    let text = std::fs::read_to_string(&path).expect("config/manager/kustomization.yaml");
    let kustomization: Value = serde_norway::from_str(&text).expect("kustomization YAML");
    let images = kustomization["images"].as_array().expect("images:");
    let image = images
        .iter()
        .find(|i| {
            i["name"]
                .as_str()
                .is_some_and(|n| n.ends_with(&format!("/{name}")))
        })
        .unwrap_or_else(|| panic!("{name} is not in {}", path.display()));
    let tag = image["newTag"].as_str().expect("newTag");
    assert_eq!(tag, format!("v{}", env!("CARGO_PKG_VERSION")));
    format!("{}:{tag}", image["name"].as_str().unwrap_or_default())
}

/// The commit the labels name: HEAD, `unknown` outside a git checkout.
fn revision() -> String {
    Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn expected(name: &str, revision: &str) -> Expected {
    let reference = reference(name);
    let version = reference.rsplit(':').next().unwrap_or_default().to_owned();
    let labels = [
        ("source", env!("CARGO_PKG_REPOSITORY")),
        ("licenses", env!("CARGO_PKG_LICENSE")),
        ("version", &version),
        ("revision", revision),
        ("title", name),
    ]
    .into_iter()
    .map(|(k, v)| (format!("org.opencontainers.image.{k}"), v.to_owned()))
    .collect();
    Expected {
        reference,
        entrypoint: format!("/usr/local/bin/{name}"),
        labels,
    }
}

/// Runs a command, returning stdout; panics with its stderr when it fails.
fn run(cmd: &mut Command) -> String {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        output.status.success(),
        "{cmd:?} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// images/build.sh into `out`; prints what it reported (digests, sizes, time).
fn build(bin_dir: &Path, out: &Path) {
    let start = Instant::now();
    let output = Command::new(repo().join("images/build.sh"))
        .arg("--bin-dir")
        .arg(bin_dir)
        .arg("--out")
        .arg(out)
        .output()
        .expect("running images/build.sh");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "images/build.sh failed:\n{stderr}");
    println!("{stderr}images/build.sh took {:?}", start.elapsed());
}

#[test]
fn archives_are_reproducible_and_run_as_the_image_user() {
    let images = Images::from_target_dir();
    let (_, operator) = images
        .binary("tas-operator")
        .expect("the debug binaries (make test builds them)");
    let bin_dir = operator.parent().expect("target dir");
    let tmp = tempfile::tempdir().expect("temp dir");
    let (first, second) = (tmp.path().join("first"), tmp.path().join("second"));
    build(bin_dir, &first);
    build(bin_dir, &second);

    let digests = std::fs::read_to_string(first.join("digests")).expect("digests");
    assert_eq!(
        digests,
        std::fs::read_to_string(second.join("digests")).expect("digests"),
        "two builds from the same binaries gave different digests"
    );
    let revision = revision();
    for name in TAS_IMAGES {
        let archive = first.join(format!("{name}.tar"));
        assert!(
            std::fs::read(&archive).ok() == std::fs::read(second.join(format!("{name}.tar"))).ok(),
            "{name}.tar differs between two builds"
        );
        check_archive(&archive, name, &expected(name, &revision), tmp.path());
    }
}

/// Reads the archive as `docker load` does and runs its entrypoint in its root.
fn check_archive(archive: &Path, name: &str, expected: &Expected, tmp: &Path) {
    let unpacked = tmp.join(format!("{name}-archive"));
    let rootfs = tmp.join(format!("{name}-rootfs"));
    for dir in [&unpacked, &rootfs] {
        std::fs::create_dir(dir).expect("unpack dir");
    }
    run(Command::new("tar")
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(&unpacked));
    let read_json = |file: &str| -> Value {
        let text = std::fs::read_to_string(unpacked.join(file))
            .unwrap_or_else(|e| panic!("{name}: {file}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {file}: {e}"))
    };
    let manifest = read_json("manifest.json");
    let [entry] = manifest.as_array().map(Vec::as_slice).unwrap_or_default() else {
        panic!("{name}: manifest.json holds not one image: {manifest}");
    };
    assert_eq!(entry["RepoTags"], serde_json::json!([expected.reference]));
    let config = read_json(entry["Config"].as_str().expect("Config"));
    let labels: BTreeMap<String, String> =
        serde_json::from_value(config["config"]["Labels"].clone()).expect("labels");
    assert_eq!(config["config"]["User"], USER, "{name}");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!([expected.entrypoint])
    );
    assert_eq!(labels, expected.labels, "{name}");

    for layer in entry["Layers"].as_array().expect("Layers") {
        let layer = unpacked.join(layer.as_str().expect("layer file"));
        let listing = run(Command::new("tar").arg("-tzf").arg(&layer));
        // Only the entrypoint is a program: no /bin/sh, no busybox, no dpkg or apt.
        let programs: Vec<&str> = listing
            .lines()
            .filter(|p| {
                ["bin/", "sbin/", "usr/bin/", "usr/sbin/"]
                    .iter()
                    .any(|d| p.starts_with(d) && p.len() > d.len())
            })
            .collect();
        assert!(
            programs.is_empty(),
            "{name}: programs in the image: {programs:?}"
        );
        run(Command::new("tar")
            .arg("-xzf")
            .arg(&layer)
            .arg("-C")
            .arg(&rootfs));
    }
    std::fs::remove_dir_all(&unpacked).expect("remove the unpacked archive");
    assert!(
        rootfs.join("bin/sh").symlink_metadata().is_err(),
        "{name}: /bin/sh in the image"
    );

    let env: Vec<(String, String)> = config["config"]["Env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str()?.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let version = run(entrypoint(&rootfs, &expected.entrypoint)
        .env_clear()
        .envs(env));
    assert_eq!(
        version.trim(),
        format!("{name} {}", env!("CARGO_PKG_VERSION")),
        "{name} --version in its image"
    );
    std::fs::remove_dir_all(&rootfs).expect("remove the image root");
}

/// `<entrypoint> --version` inside `rootfs`: as the image's user by chroot when root,
/// else as root of a user namespace.
fn entrypoint(rootfs: &Path, entrypoint: &str) -> Command {
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let mut cmd = if root {
        let mut cmd = Command::new("chroot");
        cmd.arg(format!("--userspec={USER}")).arg(rootfs);
        cmd
    } else {
        let mut cmd = Command::new("unshare");
        cmd.arg("--map-root-user")
            .arg(format!("--root={}", rootfs.display()));
        cmd
    };
    cmd.arg(entrypoint).arg("--version");
    cmd
}

/// The Dockerfile's user, entrypoint and labels of each image's target, its `ARG`s as
/// `make images` passes them: what the archives are checked against above.
#[test]
fn the_dockerfile_sets_what_the_archives_carry() {
    let revision = revision();
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).expect("Dockerfile");
    let stages = stages(&dockerfile);
    for name in TAS_IMAGES {
        let expected = expected(name, &revision);
        let version = expected.labels["org.opencontainers.image.version"].clone();
        let args = BTreeMap::from([("VERSION", version), ("REVISION", revision.clone())]);
        let target = name.trim_start_matches("tas-");
        let stage = resolve(&stages, target);
        let labels: BTreeMap<String, String> = stage
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), substitute(v, &args)))
            .collect();
        assert_eq!(labels, expected.labels, "Dockerfile target {target}");
        assert_eq!(
            stage.user.as_deref(),
            Some(USER),
            "Dockerfile target {target}"
        );
        let entrypoint: Vec<String> =
            serde_json::from_str(stage.entrypoint.as_deref().unwrap_or("null"))
                .unwrap_or_else(|e| panic!("target {target}: ENTRYPOINT is not a JSON array: {e}"));
        assert_eq!(
            entrypoint,
            [expected.entrypoint],
            "Dockerfile target {target}"
        );
    }
}

/// One build stage: its base and what it sets itself.
#[derive(Default, Clone)]
struct Stage {
    from: String,
    labels: BTreeMap<String, String>,
    user: Option<String>,
    entrypoint: Option<String>,
}

/// The stages by name (`FROM ... AS <name>`), instructions joined across `\` lines.
fn stages(dockerfile: &str) -> BTreeMap<String, Stage> {
    let mut stages = BTreeMap::new();
    let mut current: Option<(String, Stage)> = None;
    let joined = dockerfile
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    for line in joined.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (instruction, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        match instruction.to_ascii_uppercase().as_str() {
            "FROM" => {
                stages.extend(current.take());
                let words: Vec<&str> = rest.split_whitespace().collect();
                if let [from, as_, name] = words[..]
                    && as_.eq_ignore_ascii_case("as")
                {
                    let stage = Stage {
                        from: from.to_owned(),
                        ..Stage::default()
                    };
                    current = Some((name.to_owned(), stage));
                }
            }
            "LABEL" => {
                if let Some((_, stage)) = current.as_mut() {
                    stage.labels.extend(label_pairs(rest));
                }
            }
            "USER" => {
                if let Some((_, stage)) = current.as_mut() {
                    stage.user = Some(rest.to_owned());
                }
            }
            "ENTRYPOINT" => {
                if let Some((_, stage)) = current.as_mut() {
                    stage.entrypoint = Some(rest.to_owned());
                }
            }
            _ => {}
        }
    }
    stages.extend(current);
    stages
}

/// A stage with what it inherits from the stages it is built `FROM`.
fn resolve(stages: &BTreeMap<String, Stage>, name: &str) -> Stage {
    let stage = stages
        .get(name)
        .unwrap_or_else(|| panic!("no stage {name} in the Dockerfile"));
    let Some(base) = stages
        .get(&stage.from)
        .map(|_| resolve(stages, &stage.from))
    else {
        return stage.clone();
    };
    let mut labels = base.labels;
    labels.extend(stage.labels.clone());
    Stage {
        from: stage.from.clone(),
        labels,
        user: stage.user.clone().or(base.user),
        entrypoint: stage.entrypoint.clone().or(base.entrypoint),
    }
}

/// `k="v" k2=v2` → pairs, quotes removed.
fn label_pairs(text: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut rest = text.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').unwrap_or((quoted, "")),
            None => after.split_once(char::is_whitespace).unwrap_or((after, "")),
        };
        pairs.push((key.trim().to_owned(), value.to_owned()));
        rest = next.trim();
    }
    pairs
}

/// `${NAME}` → its value.
fn substitute(value: &str, args: &BTreeMap<&str, String>) -> String {
    args.iter().fold(value.to_owned(), |v, (k, a)| {
        v.replace(&format!("${{{k}}}"), a)
    })
}
