//! A support bundle as files in memory ([`Bundle`]: path inside the bundle → bytes),
//! written out as a directory or a gzipped tar archive (a path ending in `.tar.gz` or
//! `.tgz`), and read back from either. `kubectl tas gather` fills one; `status` and
//! `nodes` with `--from-bundle` read one instead of the cluster.
//!
//! In an archive every file sits under one top directory named after the archive
//! (`tas-gather-X.tar.gz` → `tas-gather-X/...`), as `tar xzf` users expect; reading
//! strips it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::Error;

/// The files of a bundle, by path inside it (`/`-separated, relative).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bundle {
    /// Path → content.
    pub files: BTreeMap<String, Vec<u8>>,
}

fn bundle_error(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::Bundle {
        path: path.to_owned(),
        message: message.to_string(),
    }
}

/// Whether `path` names an archive rather than a directory.
pub fn is_archive(path: &Path) -> bool {
    let name = path.to_string_lossy();
    name.ends_with(".tar.gz") || name.ends_with(".tgz")
}

/// The archive's top directory: its file name without `.tar.gz` / `.tgz`.
fn top_dir(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tas-gather".into());
    name.trim_end_matches(".tar.gz")
        .trim_end_matches(".tgz")
        .to_owned()
}

impl Bundle {
    /// Adds a file.
    pub fn put(&mut self, path: impl Into<String>, content: impl Into<Vec<u8>>) {
        self.files.insert(path.into(), content.into());
    }

    /// Adds `value` as YAML; its size in bytes.
    pub fn put_yaml<T: Serialize>(&mut self, path: &str, value: &T) -> usize {
        // Plain data (JSON values and API types) always serializes.
        let text = serde_norway::to_string(value).unwrap_or_default();
        let len = text.len();
        self.put(path, text);
        len
    }

    /// The file at `path`, parsed from YAML (JSON is YAML too); `None` when absent.
    pub fn yaml<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>, Error> {
        let Some(bytes) = self.files.get(path) else {
            return Ok(None);
        };
        serde_norway::from_slice(bytes)
            .map(Some)
            .map_err(|e| bundle_error(Path::new(path), e))
    }

    /// Writes the bundle to `path`: a `.tar.gz` / `.tgz` archive, else a directory
    /// (created; it must not exist yet, so nothing is mixed with older files).
    pub fn write(&self, path: &Path) -> Result<(), Error> {
        if path.exists() {
            return Err(bundle_error(
                path,
                "already exists; choose another --output",
            ));
        }
        if is_archive(path) {
            self.write_archive(path)
        } else {
            for (name, content) in &self.files {
                let file = path.join(name);
                if let Some(parent) = file.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| bundle_error(parent, e))?;
                }
                std::fs::write(&file, content).map_err(|e| bundle_error(&file, e))?;
            }
            Ok(())
        }
    }

    fn write_archive(&self, path: &Path) -> Result<(), Error> {
        let file = std::fs::File::create(path).map_err(|e| bundle_error(path, e))?;
        let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
        let mut tar = tar::Builder::new(gz);
        let top = top_dir(path);
        let mtime = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        for (name, content) in &self.files {
            let mut header = tar::Header::new_gnu();
            header.set_size(content.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(mtime);
            header.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut header, format!("{top}/{name}"), content.as_slice())
                .map_err(|e| bundle_error(path, e))?;
        }
        let gz = tar.into_inner().map_err(|e| bundle_error(path, e))?;
        let mut file = gz.finish().map_err(|e| bundle_error(path, e))?;
        file.flush().map_err(|e| bundle_error(path, e))
    }

    /// Reads a bundle [`write`](Self::write) wrote (a directory or an archive).
    pub fn read(path: &Path) -> Result<Self, Error> {
        if is_archive(path) {
            return Self::read_archive(path);
        }
        if !path.is_dir() {
            return Err(bundle_error(
                path,
                "not a directory nor a .tar.gz/.tgz archive of `kubectl tas gather`",
            ));
        }
        let mut bundle = Self::default();
        let mut pending: Vec<PathBuf> = vec![path.to_owned()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).map_err(|e| bundle_error(&dir, e))? {
                let entry = entry.map_err(|e| bundle_error(&dir, e))?;
                let file = entry.path();
                if file.is_dir() {
                    pending.push(file);
                    continue;
                }
                let content = std::fs::read(&file).map_err(|e| bundle_error(&file, e))?;
                let name = file
                    .strip_prefix(path)
                    .unwrap_or(&file)
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                bundle.put(name, content);
            }
        }
        Ok(bundle)
    }

    fn read_archive(path: &Path) -> Result<Self, Error> {
        let file = std::fs::File::open(path).map_err(|e| bundle_error(path, e))?;
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
        let mut bundle = Self::default();
        for entry in tar.entries().map_err(|e| bundle_error(path, e))? {
            let mut entry = entry.map_err(|e| bundle_error(path, e))?;
            if entry.header().entry_type() != tar::EntryType::Regular {
                continue;
            }
            let name = entry
                .path()
                .map_err(|e| bundle_error(path, e))?
                .components()
                .skip(1)
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let mut content = Vec::new();
            entry
                .read_to_end(&mut content)
                .map_err(|e| bundle_error(path, e))?;
            bundle.put(name, content);
        }
        Ok(bundle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Bundle {
        let mut b = Bundle::default();
        b.put("manifest.yaml", "a: 1\n");
        b.put("namespaces/tas-system/logs/p/c.log", "line\n");
        b
    }

    #[test]
    fn a_directory_and_an_archive_read_back_the_same_files() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["out", "out.tar.gz", "out.tgz"] {
            let path = dir.path().join(name);
            sample().write(&path).unwrap();
            assert_eq!(Bundle::read(&path).unwrap(), sample(), "{name}");
            let again = sample().write(&path).unwrap_err().to_string();
            assert!(again.contains("already exists"), "{again}");
        }
    }

    #[test]
    fn reading_something_else_says_what_a_bundle_is() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.txt");
        std::fs::write(&file, "x").unwrap();
        let err = Bundle::read(&file).unwrap_err().to_string();
        assert!(err.contains("not a directory nor a .tar.gz"), "{err}");
    }
}
