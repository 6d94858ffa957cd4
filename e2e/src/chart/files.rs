//! The chart directory on disk: read it back, or make it hold exactly the generated files.

use std::path::{Path, PathBuf};

use super::{ChartError, Files};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ChartError + '_ {
    move |source| ChartError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Every file under `dir`, by path relative to it (`/`-separated); empty if `dir` does
/// not exist.
pub fn read(dir: &Path) -> Result<Files, ChartError> {
    let mut files = Files::new();
    if !dir.exists() {
        return Ok(files);
    }
    let mut pending: Vec<PathBuf> = vec![dir.to_owned()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).map_err(io(&current))? {
            let path = entry.map_err(io(&current))?.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let content = std::fs::read_to_string(&path).map_err(io(&path))?;
            let relative = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            files.insert(relative, content);
        }
    }
    Ok(files)
}

/// Makes `dir` hold exactly `files`: writes each, removes any other file under it.
pub fn write(dir: &Path, files: &Files) -> Result<(), ChartError> {
    for stale in read(dir)?.keys().filter(|k| !files.contains_key(*k)) {
        let path = dir.join(stale);
        std::fs::remove_file(&path).map_err(io(&path))?;
    }
    for (relative, content) in files {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&path, content).map_err(io(&path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_leaves_exactly_the_given_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("templates")).unwrap();
        std::fs::write(dir.path().join("templates/old.yaml"), "old").unwrap();
        let files = Files::from([
            ("Chart.yaml".to_owned(), "a".to_owned()),
            ("templates/new.yaml".to_owned(), "b".to_owned()),
        ]);
        write(dir.path(), &files).unwrap();
        assert_eq!(read(dir.path()).unwrap(), files);
    }
}
