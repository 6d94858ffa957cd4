//! `make plugin-dist` (kubectl-tas/krew/dist.sh) on the test's own kubectl-tas: the
//! archive holds an executable `kubectl-tas` that runs, the LICENSE and README; its
//! sha256 file and the krew manifest carry the archive's real hash; the manifest is a
//! krew `Plugin` whose URI is the release URI of the workspace repository and names the
//! archive that was built.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn workspace_field(name: &str) -> String {
    let cargo = include_str!("../../Cargo.toml");
    let section = cargo
        .split("[workspace.package]")
        .nth(1)
        .expect("[workspace.package]");
    section
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} = \"")))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or_else(|| panic!("{name} in [workspace.package]"))
        .to_owned()
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn plugin_dist_writes_an_archive_its_sha256_and_a_krew_manifest() {
    let out = tempfile::tempdir().expect("a directory");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("krew/dist.sh");
    let run = Command::new(&script)
        .args(["--binary", env!("CARGO_BIN_EXE_kubectl-tas"), "--out"])
        .arg(out.path())
        .output()
        .expect("dist.sh runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "dist.sh failed: {}\n{stdout}",
        String::from_utf8_lossy(&run.stderr)
    );
    let written: Vec<&str> = stdout.lines().collect();
    assert_eq!(written.len(), 3, "{stdout}");

    let version = env!("CARGO_PKG_VERSION");
    let archive_path = Path::new(written[0]);
    let archive = archive_path
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let (os, arch) = (std::env::consts::OS, std::env::consts::ARCH);
    let arch = match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    assert_eq!(archive, format!("kubectl-tas_{version}_{os}_{arch}.tar.gz"));
    let bytes = std::fs::read(archive_path).unwrap();
    let sha = sha256_hex(&bytes);
    let sha_file = std::fs::read_to_string(written[1]).unwrap();
    assert_eq!(sha_file, format!("{sha}  {archive}\n"));

    // The manifest: a krew Plugin naming this archive, its hash and the release URI.
    let manifest: Value = serde_norway::from_str(&std::fs::read_to_string(written[2]).unwrap())
        .expect("the manifest is YAML");
    assert_eq!(
        manifest["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(manifest["metadata"]["name"], "tas");
    assert_eq!(manifest["spec"]["version"], format!("v{version}"));
    assert!(
        manifest["spec"]["shortDescription"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    let platforms = manifest["spec"]["platforms"].as_array().expect("platforms");
    assert_eq!(platforms.len(), 1);
    let p = &platforms[0];
    assert_eq!(p["selector"]["matchLabels"]["os"], os);
    assert_eq!(p["selector"]["matchLabels"]["arch"], arch);
    assert_eq!(p["sha256"], sha.as_str());
    assert_eq!(p["bin"], "kubectl-tas");
    assert_eq!(
        p["uri"],
        format!(
            "{}/releases/download/v{version}/{archive}",
            workspace_field("repository")
        )
    );
    assert_eq!(workspace_field("license"), "Apache-2.0");

    // The archive: the three files, the binary executable; it runs.
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
    let unpacked = tempfile::tempdir().unwrap();
    let mut names = Vec::new();
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        let mode = entry.header().mode().unwrap();
        let mut content = Vec::new();
        entry.read_to_end(&mut content).unwrap();
        let path = unpacked.path().join(&name);
        std::fs::write(&path, &content).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        names.push((name, mode));
    }
    names.sort();
    assert_eq!(
        names,
        [
            ("LICENSE".to_owned(), 0o644),
            ("README.md".to_owned(), 0o644),
            ("kubectl-tas".to_owned(), 0o755)
        ]
    );
    let license = std::fs::read_to_string(unpacked.path().join("LICENSE")).unwrap();
    assert!(license.contains("Apache License") && license.contains("Version 2.0"));
    let ran = Command::new(unpacked.path().join("kubectl-tas"))
        .arg("--version")
        .output()
        .expect("the packed kubectl-tas runs");
    assert!(ran.status.success());
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout),
        format!("kubectl tas {version}\n")
    );
}
