//! Reading what the node hands the agent (the kubelet's config file and drop-ins, its
//! `/configz` answer, sysfs files) with a size bound: a file or an answer past the bound
//! is refused with an error naming the bound, instead of filling the agent's memory
//! (its container has a memory limit, so an unbounded read ends in an OOM kill on every
//! publish). The bounds are far above what the kubelet or the kernel writes.

use std::io::{self, Read};
use std::path::Path;

use futures::{AsyncBufRead, AsyncReadExt};

/// The most a kubelet configuration document or `/configz` answer may hold (a full
/// KubeletConfiguration is a few KiB).
pub const CONFIG_LIMIT: u64 = 1 << 20;
/// The most one sysfs file may hold (a CPU list of thousands of CPUs is a few KiB).
pub const SYSFS_LIMIT: u64 = 64 << 10;

/// The error of a read past `limit` bytes.
fn too_large(limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("larger than the {limit}-byte limit"),
    )
}

/// The text of `path`, refused past `limit` bytes (the caller names the file).
pub fn read_file(path: &Path, limit: u64) -> io::Result<String> {
    let file = std::fs::File::open(path)?;
    let mut text = String::new();
    file.take(limit + 1).read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(text)
}

/// The text of a stream, refused past `limit` bytes.
pub async fn read_stream(stream: impl AsyncBufRead + Unpin, limit: u64) -> io::Result<String> {
    let mut bytes = Vec::new();
    stream.take(limit + 1).read_to_end(&mut bytes).await?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit));
    }
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_the_limit_is_refused_naming_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "x".repeat(11)).unwrap();
        let err = read_file(&path, 10).unwrap_err();
        assert!(err.to_string().contains("10-byte limit"), "{err}");
        assert_eq!(read_file(&path, 11).unwrap().len(), 11);
    }

    #[tokio::test]
    async fn a_stream_past_the_limit_is_refused_naming_the_limit() {
        let body = "y".repeat(11);
        let err = read_stream(body.as_bytes(), 10).await.unwrap_err();
        assert!(err.to_string().contains("10-byte limit"), "{err}");
        assert_eq!(read_stream(body.as_bytes(), 11).await.unwrap(), body);
    }
}
