//! Credentials of a test cluster: the service-account signing key and the admin token.
//!
//! Everything is generated in-process, in pure Rust, so no `openssl` is needed.

use std::hash::{BuildHasher, RandomState};

use crate::Error;

/// An ECDSA P-256 key pair that signs and verifies service-account tokens.
pub struct ServiceAccountKey {
    /// The private key, PKCS#8 PEM (`PRIVATE KEY`), for kube-apiserver's
    /// `--service-account-signing-key-file` and kube-controller-manager's
    /// `--service-account-private-key-file`.
    pub private_pem: String,
    /// The public key, SubjectPublicKeyInfo PEM (`PUBLIC KEY`), for kube-apiserver's
    /// `--service-account-key-file`. A separate file because kube-apiserver reads
    /// EC private keys there only in SEC1 form, not PKCS#8.
    pub public_pem: String,
}

impl ServiceAccountKey {
    /// Generates a fresh key pair.
    pub fn generate() -> Result<Self, Error> {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        Ok(Self {
            private_pem: key.serialize_pem(),
            public_pem: key.public_key_pem(),
        })
    }
}

/// A random bearer token of 32 hex digits.
///
/// Drawn from the standard library's per-process random hasher keys: the cluster only
/// listens on loopback and lives for one test run, so this needs to be unique, not
/// cryptographically strong.
pub fn random_token() -> String {
    let a = RandomState::new().hash_one(std::process::id());
    let b = RandomState::new().hash_one(std::time::SystemTime::now());
    format!("{a:016x}{b:016x}")
}

/// The `--token-auth-file` line granting `token` cluster-admin (`system:masters`).
pub fn admin_token_csv(token: &str) -> String {
    format!("{token},admin,admin-uid,\"system:masters\"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_pkcs8_with_a_separate_public_key() {
        let key = ServiceAccountKey::generate().unwrap();
        assert!(key.private_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(key.public_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
    }

    #[test]
    fn tokens_differ() {
        let token = random_token();
        assert_eq!(token.len(), 32);
        assert_ne!(token, random_token());
    }
}
