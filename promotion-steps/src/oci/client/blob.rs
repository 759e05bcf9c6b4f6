//! A blob as it streams from a registry, checked chunk by chunk against its descriptor.

use sha2::Digest as _;

use super::root_cause;
use crate::oci::OciError;

/// A blob being read: each chunk counts toward the descriptor's size (more is refused)
/// and the hash; the end is refused unless the bytes hash to the descriptor's digest.
pub(crate) struct Blob {
    pub(super) response: reqwest::Response,
    pub(super) repo: String,
    pub(super) what: String,
    pub(super) expected: String,
    pub(super) size: u64,
    pub(super) limit: u64,
    pub(super) step: &'static str,
    pub(super) read: u64,
    pub(super) hasher: sha2::Sha256,
}

impl Blob {
    /// The next bytes, or `None` at the end of a blob that checked out.
    pub(crate) async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, OciError> {
        let url = self.response.url().clone();
        let chunk = self
            .response
            .chunk()
            .await
            .map_err(|err| OciError::Unreachable {
                repo: self.repo.clone(),
                url: url.to_string(),
                reason: if err.is_timeout() {
                    "timed out".into()
                } else {
                    format!("the transfer broke off: {}", root_cause(&err))
                },
            })?;
        let Some(chunk) = chunk else {
            let got = crate::oci::hex_digest(&std::mem::take(&mut self.hasher).finalize());
            if !got.eq_ignore_ascii_case(&self.expected) {
                return Err(OciError::DigestMismatch {
                    what: self.what.clone(),
                    repo: self.repo.clone(),
                    expected: self.expected.clone(),
                    got,
                });
            }
            return Ok(None);
        };
        self.read += chunk.len() as u64;
        if self.read > self.limit {
            return Err(if self.read > self.size && self.size > 0 {
                OciError::LongerThanDescribed {
                    what: self.what.clone(),
                    repo: self.repo.clone(),
                    size: self.size,
                }
            } else {
                OciError::TooLarge {
                    what: self.what.clone(),
                    repo: self.repo.clone(),
                    limit: self.limit >> 20,
                    step: self.step,
                    hint: "move large content elsewhere, or name a smaller artifact",
                }
            });
        }
        self.hasher.update(&chunk);
        Ok(Some(chunk.to_vec()))
    }
}
