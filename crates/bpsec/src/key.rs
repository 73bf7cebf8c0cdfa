//! Key material: a secret that is zeroed when dropped and never printed, and the AES key wrap
//! (RFC 3394) with which RFC 9173 carries a per-bundle key inside a block.

use std::fmt;

use aes_kw::{KeyInit, KwAes128, KwAes256};
use zeroize::Zeroizing;

use crate::error::SecurityError;

/// A symmetric key: an HMAC key, an AES key, or a key-encryption key for key wrap.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(Zeroizing<Vec<u8>>);

impl Key {
    /// The key of these bytes.
    pub fn new(bytes: &[u8]) -> Self {
        Self(Zeroizing::new(bytes.to_vec()))
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it is empty (no context accepts an empty key).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({} bytes)", self.0.len())
    }
}

/// Wraps `key` (a multiple of 8 bytes, at least 16) under the key-encryption key `kek` (16 or
/// 32 bytes).
pub fn wrap_key(kek: &Key, key: &Key) -> Result<Vec<u8>, SecurityError> {
    if key.len() < 16 || !key.len().is_multiple_of(8) {
        return Err(SecurityError::BadKey {
            what: "key wrap (the wrapped key)",
            len: key.len(),
        });
    }
    let mut out = vec![0u8; key.len() + 8];
    let done = match kek.len() {
        16 => KwAes128::new_from_slice(kek.as_bytes())
            .ok()
            .and_then(|kw| kw.wrap_key(key.as_bytes(), &mut out).ok().map(|_| ())),
        32 => KwAes256::new_from_slice(kek.as_bytes())
            .ok()
            .and_then(|kw| kw.wrap_key(key.as_bytes(), &mut out).ok().map(|_| ())),
        len => {
            return Err(SecurityError::BadKey {
                what: "key wrap (the key-encryption key)",
                len,
            });
        }
    };
    done.map(|()| out).ok_or(SecurityError::BadKey {
        what: "key wrap",
        len: key.len(),
    })
}

/// Unwraps `wrapped` under `kek`; `block` names the security block in the error.
pub fn unwrap_key(kek: &Key, wrapped: &[u8], block: u64) -> Result<Key, SecurityError> {
    if wrapped.len() < 24 || !wrapped.len().is_multiple_of(8) {
        return Err(SecurityError::Unwrap { block });
    }
    let mut out = Zeroizing::new(vec![0u8; wrapped.len() - 8]);
    let ok = match kek.len() {
        16 => KwAes128::new_from_slice(kek.as_bytes())
            .ok()
            .is_some_and(|kw| kw.unwrap_key(wrapped, &mut out).is_ok()),
        32 => KwAes256::new_from_slice(kek.as_bytes())
            .ok()
            .is_some_and(|kw| kw.unwrap_key(wrapped, &mut out).is_ok()),
        len => {
            return Err(SecurityError::BadKey {
                what: "key unwrap (the key-encryption key)",
                len,
            });
        }
    };
    if ok {
        Ok(Key(out))
    } else {
        Err(SecurityError::Unwrap { block })
    }
}
