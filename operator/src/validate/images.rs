//! Image references: the syntax the operator accepts, and the set the installer allows.
//!
//! Whoever edits the object must not be able to run code of their choice with the node
//! agent's rights (root, host paths) or the scheduler's (bind any pod, evict): an image
//! the object names must be one the operator's install allows, exactly — the two
//! default images (`--updater-image`, `--scheduler-image`) and the list of
//! `--allowed-images`. No prefix or repository matching: a tag can be moved, so an
//! installer who wants a fixed image lists it by digest.

/// Why an image reference is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefError {
    /// Empty.
    #[error("the reference is empty")]
    Empty,
    /// Longer than the container runtimes accept.
    #[error("the reference is longer than 512 characters")]
    TooLong,
    /// The repository part is malformed.
    #[error(
        "'{0}' is not a repository path (lowercase components of letters and digits separated by '.', '_', '__' or '-', after an optional registry host[:port])"
    )]
    Repository(String),
    /// The tag is malformed.
    #[error(
        "'{0}' is not a tag (letters, digits, '_', '.', '-', at most 128, not starting with '.' or '-')"
    )]
    Tag(String),
    /// The digest is malformed.
    #[error("'{0}' is not a digest: write sha256:<64 lowercase hex digits>")]
    Digest(String),
    /// Neither tag nor digest, where one is required.
    #[error("no tag or digest: write repository:tag, repository@sha256:<digest> or both")]
    Unpinned,
}

/// A parsed `repository[:tag][@sha256:<hex>]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef<'a> {
    /// Registry and path.
    pub repository: &'a str,
    /// The tag, if any.
    pub tag: Option<&'a str>,
    /// The digest (`sha256:...`), if any.
    pub digest: Option<&'a str>,
}

impl<'a> ImageRef<'a> {
    /// Parses `reference` (the Docker/OCI reference grammar, sha256 digests only).
    pub fn parse(reference: &'a str) -> Result<Self, ImageRefError> {
        if reference.is_empty() {
            return Err(ImageRefError::Empty);
        }
        if reference.len() > 512 {
            return Err(ImageRefError::TooLong);
        }
        let (name, digest) = match reference.split_once('@') {
            Some((name, digest)) => (name, Some(digest)),
            None => (reference, None),
        };
        if let Some(d) = digest {
            let hex = d.strip_prefix("sha256:").unwrap_or_default();
            let lower_hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
            if hex.len() != 64 || !hex.chars().all(lower_hex) {
                return Err(ImageRefError::Digest(d.to_owned()));
            }
        }
        // A ':' after the last '/' starts the tag; one before it is a registry port.
        let last_slash = name.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match name[last_slash..].rfind(':') {
            Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
            None => (name, None),
        };
        if let Some(t) = tag
            && !valid_tag(t)
        {
            return Err(ImageRefError::Tag(t.to_owned()));
        }
        if !valid_repository(repository) {
            return Err(ImageRefError::Repository(repository.to_owned()));
        }
        Ok(Self {
            repository,
            tag,
            digest,
        })
    }

    /// Whether a tag or a digest says which image this is.
    pub fn is_pinned(&self) -> bool {
        self.tag.is_some() || self.digest.is_some()
    }
}

fn valid_tag(tag: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    tag.len() <= 128
        && tag.chars().next().is_some_and(word)
        && tag.chars().all(|c| word(c) || c == '.' || c == '-')
}

fn valid_repository(repository: &str) -> bool {
    if repository.len() > 255 {
        return false;
    }
    let mut parts: Vec<&str> = repository.split('/').collect();
    // The first part is a registry when it looks like a host: a '.', a ':' or localhost.
    if parts.len() > 1 && (parts[0].contains(['.', ':']) || parts[0] == "localhost") {
        if !valid_registry(parts[0]) {
            return false;
        }
        parts.remove(0);
    }
    parts.iter().all(|p| valid_path_component(p))
}

fn valid_registry(registry: &str) -> bool {
    let (host, port) = match registry.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (registry, None),
    };
    let label = |l: &str| {
        !l.is_empty()
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    host.split('.').all(label)
        && port
            .is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.chars().all(|c| c.is_ascii_digit()))
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn valid_path_component(component: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let mut chars = component.chars().peekable();
    if !chars.peek().copied().is_some_and(alnum) {
        return false;
    }
    while let Some(c) = chars.next() {
        if alnum(c) {
            continue;
        }
        let separator_ok = match c {
            '.' => true,
            '_' => {
                if chars.peek() == Some(&'_') {
                    chars.next();
                }
                true
            }
            '-' => {
                while chars.peek() == Some(&'-') {
                    chars.next();
                }
                true
            }
            _ => false,
        };
        if !separator_ok || !chars.peek().copied().is_some_and(alnum) {
            return false;
        }
    }
    true
}

/// An entry of `--allowed-images` that is not a full image reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{entry}': {reason}")]
pub struct AllowedImagesError {
    /// The entry as written.
    pub entry: String,
    /// What is wrong with it.
    pub reason: ImageRefError,
}

/// The `--allowed-images` list (`TAS_ALLOWED_IMAGES`): full references (with a tag, a
/// digest or both) separated by commas and/or whitespace; empty entries are ignored.
pub fn parse_allowed_images(list: &str) -> Result<Vec<String>, AllowedImagesError> {
    list.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|e| !e.is_empty())
        .map(|entry| {
            let error = |reason| AllowedImagesError {
                entry: entry.to_owned(),
                reason,
            };
            let parsed = ImageRef::parse(entry).map_err(error)?;
            if !parsed.is_pinned() {
                return Err(error(ImageRefError::Unpinned));
            }
            Ok(entry.to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_of_every_form_parse() {
        let with_digest = format!("registry.example:5000/tas/tas-updater:v1.2.3@{DIGEST}");
        let r = ImageRef::parse(&with_digest).unwrap();
        assert_eq!(
            (r.repository, r.tag, r.digest),
            (
                "registry.example:5000/tas/tas-updater",
                Some("v1.2.3"),
                Some(DIGEST)
            )
        );
        let r = ImageRef::parse("localhost:5000/tas-scheduler").unwrap();
        assert_eq!(
            (r.repository, r.tag),
            ("localhost:5000/tas-scheduler", None)
        );
        assert!(!r.is_pinned());
        for ok in [
            "ghcr.io/tas-dev/tas-updater:v0.1.0",
            "tas-updater:latest",
            "my_org/a__b/c--d.e:1_x",
            &format!("tas-updater@{DIGEST}"),
        ] {
            assert!(ImageRef::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn malformed_references_are_refused() {
        for (bad, want) in [
            ("", ImageRefError::Empty),
            (
                "Registry.Example/Tas:1",
                ImageRefError::Repository("Registry.Example/Tas".into()),
            ),
            ("tas:-1", ImageRefError::Tag("-1".into())),
            ("tas:1 ; rm", ImageRefError::Tag("1 ; rm".into())),
            ("tas@sha256:abc", ImageRefError::Digest("sha256:abc".into())),
            ("tas@md5:0123", ImageRefError::Digest("md5:0123".into())),
            ("a//b:1", ImageRefError::Repository("a//b".into())),
            ("a/-b:1", ImageRefError::Repository("a/-b".into())),
            ("a/b.:1", ImageRefError::Repository("a/b.".into())),
        ] {
            assert_eq!(ImageRef::parse(bad), Err(want), "{bad:?}");
        }
        assert_eq!(
            ImageRef::parse(&"a".repeat(513)),
            Err(ImageRefError::TooLong)
        );
    }

    #[test]
    fn the_allowed_list_takes_commas_and_whitespace_and_needs_pinned_references() {
        let list = format!(" a.example/x:1,b.example/y@{DIGEST}\n c.example/z:2@{DIGEST} ,, ");
        assert_eq!(
            parse_allowed_images(&list).unwrap(),
            [
                "a.example/x:1".to_owned(),
                format!("b.example/y@{DIGEST}"),
                format!("c.example/z:2@{DIGEST}"),
            ]
        );
        assert_eq!(parse_allowed_images("").unwrap(), Vec::<String>::new());
        let err = parse_allowed_images("a.example/x:1,a.example/unpinned").unwrap_err();
        assert_eq!(err.reason, ImageRefError::Unpinned);
        assert!(err.to_string().contains("'a.example/unpinned'"), "{err}");
    }
}
