//! BCB-AES-GCM (RFC 9173 §4): a Block Confidentiality Block whose targets' block-type-specific
//! data is replaced by its AES-GCM ciphertext (same length), the authentication tags being the
//! block's results and the additional authenticated data (AAD, §4.7.2) the scope fields.

use aes_gcm::aead::AeadInOut;
use aes_gcm::{Aes128Gcm, Aes256Gcm, KeyInit};
use bytes::Bytes;
use wire::{BlockFlags, Bundle, Eid, ExtensionBlock, ExtensionData};

use crate::BLOCK_BCB;
use crate::asb::{AbstractSecurityBlock, FLAG_PARAMETERS_PRESENT};
use crate::cbor;
use crate::error::SecurityError;
use crate::key::{Key, unwrap_key, wrap_key};
use crate::target::{self, SCOPE_ALL};

/// The security context id of BCB-AES-GCM.
pub const CONTEXT_ID: i64 = 2;
/// Parameter: initialization vector.
pub const PARAM_IV: u64 = 1;
/// Parameter: AES variant.
pub const PARAM_AES_VARIANT: u64 = 2;
/// Parameter: wrapped key.
pub const PARAM_WRAPPED_KEY: u64 = 3;
/// Parameter: AAD scope flags.
pub const PARAM_SCOPE: u64 = 4;
/// Result: the authentication tag.
pub const RESULT_TAG: u64 = 1;
/// The IV length this implementation makes and accepts: 96 bits, the length RFC 9173 §4.3.1
/// recommends and GCM's fast path.
pub const IV_LEN: usize = 12;
/// The authentication tag's length (128 bits, RFC 9173 §4.4.1).
pub const TAG_LEN: usize = 16;

/// The AES variant (RFC 9173 §4.3.2; codes from COSE), chosen by the key's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AesVariant {
    /// A128GCM: a 16-byte key.
    A128Gcm,
    /// A256GCM: a 32-byte key, the default.
    A256Gcm,
}

impl AesVariant {
    /// The parameter's value.
    pub fn code(self) -> u64 {
        match self {
            AesVariant::A128Gcm => 1,
            AesVariant::A256Gcm => 3,
        }
    }

    /// The variant of a parameter value.
    pub fn from_code(code: u64) -> Option<Self> {
        match code {
            1 => Some(AesVariant::A128Gcm),
            3 => Some(AesVariant::A256Gcm),
            _ => None,
        }
    }

    /// The variant for a key of `len` bytes.
    pub fn for_key_len(len: usize) -> Option<Self> {
        match len {
            16 => Some(AesVariant::A128Gcm),
            32 => Some(AesVariant::A256Gcm),
            _ => None,
        }
    }
}

/// How a BCB is made.
#[derive(Debug, Clone, Copy)]
pub struct EncryptSpec<'a> {
    /// Block number of the new BCB.
    pub block_number: u64,
    /// Its processing flags; "replicate in every fragment" is always added (RFC 9172 §3.9).
    pub flags: BlockFlags,
    /// The security source (this node).
    pub source: &'a Eid,
    /// The IV. It must never have been used with this key before: see `crate::IvSource`.
    pub iv: [u8; IV_LEN],
    /// AAD scope flags.
    pub scope: u64,
    /// The content-encryption key (16 or 32 bytes; its length picks the AES variant).
    pub key: &'a Key,
    /// If set, the content-encryption key travels in the block wrapped under this
    /// key-encryption key, which is then the one the acceptor holds (RFC 9173 §4.3.3).
    pub wrap_under: Option<&'a Key>,
}

/// Encrypts `targets` of `bundle` in place (their CRCs removed, RFC 9172 §3.9) and returns the
/// BCB that describes it, for the caller to insert. RFC 9172 §3.9's rules are checked first and nothing changes if one fails:
/// no target is the primary block, a BCB or a block every node must read; none is encrypted
/// already; a target protected by a BIB is encrypted only with that BIB.
pub fn encrypt(
    bundle: &mut Bundle,
    targets: &[u64],
    spec: &EncryptSpec<'_>,
) -> Result<ExtensionBlock, SecurityError> {
    let block = spec.block_number;
    let variant = AesVariant::for_key_len(spec.key.len()).ok_or(SecurityError::BadKey {
        what: "AES-GCM",
        len: spec.key.len(),
    })?;
    if targets.is_empty() {
        return Err(SecurityError::BadTarget { block, target: 0 });
    }
    let existing = target::security_blocks(bundle)?;
    for &t in targets {
        if !target::encryptable(bundle, t) || targets.iter().filter(|x| **x == t).count() > 1 {
            return Err(SecurityError::BadTarget { block, target: t });
        }
        for (number, ty, asb) in &existing {
            if !asb.targets.contains(&t) {
                continue;
            }
            if *ty == BLOCK_BCB || !targets.contains(number) {
                return Err(SecurityError::Conflict { block, target: t });
            }
        }
    }
    let flags = BlockFlags(spec.flags.0 | BlockFlags::REPLICATE_IN_EVERY_FRAGMENT);
    let security_header = (BLOCK_BCB, block, flags.0);
    let mut results = Vec::with_capacity(targets.len());
    let mut ciphertexts = Vec::with_capacity(targets.len());
    for &t in targets {
        let aad = target::scope_prefix(
            bundle,
            spec.scope,
            target::header(bundle, t),
            security_header,
        );
        let mut buf = target::data(bundle, t)
            .ok_or(SecurityError::BadTarget { block, target: t })?
            .to_vec();
        let tag = seal(variant, spec.key, &spec.iv, &aad, &mut buf)
            .ok_or(SecurityError::BadTarget { block, target: t })?;
        results.push(vec![(RESULT_TAG, cbor::bytes_item(&tag))]);
        ciphertexts.push((t, Bytes::from(buf)));
    }
    let mut parameters = vec![
        (PARAM_IV, cbor::bytes_item(&spec.iv)),
        (PARAM_AES_VARIANT, cbor::uint_item(variant.code())),
    ];
    if let Some(kek) = spec.wrap_under {
        parameters.push((
            PARAM_WRAPPED_KEY,
            cbor::bytes_item(&wrap_key(kek, spec.key)?),
        ));
    }
    parameters.push((PARAM_SCOPE, cbor::uint_item(spec.scope)));
    for (t, c) in ciphertexts {
        target::set_data(bundle, t, c);
        // RFC 9172 §3.9: a BCB's targets carry no CRC (the tag guards them).
        target::clear_crc(bundle, t);
    }
    let asb = AbstractSecurityBlock {
        targets: targets.to_vec(),
        context_id: CONTEXT_ID,
        context_flags: FLAG_PARAMETERS_PRESENT,
        source: spec.source.clone(),
        parameters,
        results,
    };
    Ok(ExtensionBlock {
        flags,
        ..ExtensionBlock::new(
            block,
            ExtensionData::Unknown {
                block_type: BLOCK_BCB,
                data: Bytes::from(asb.encode()),
            },
        )
    })
}

/// What a decryption did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decrypted {
    /// The BCB's block number (now removed).
    pub block: u64,
    /// Who added it.
    pub source: Eid,
    /// The targets now in plaintext.
    pub targets: Vec<u64>,
}

/// Decrypts every target of BCB `bcb_number` with `key` (the content-encryption key, or the
/// key-encryption key when the block carries a wrapped key) and removes the BCB: what a
/// security acceptor does (RFC 9172 §5.1.2). All tags are checked before anything changes, so
/// a failure leaves the bundle as it was.
pub fn decrypt(
    bundle: &mut Bundle,
    bcb_number: u64,
    key: &Key,
) -> Result<Decrypted, SecurityError> {
    let block = bcb_number;
    let b = bundle
        .extensions
        .iter()
        .find(|b| b.number == block)
        .ok_or(SecurityError::NoSuchBlock(block))?;
    let ExtensionData::Unknown {
        block_type: BLOCK_BCB,
        data,
    } = &b.data
    else {
        return Err(SecurityError::NoSuchBlock(block));
    };
    let flags = b.flags.0;
    let asb = AbstractSecurityBlock::decode(data)
        .map_err(|error| SecurityError::Malformed { block, error })?;
    if asb.context_id != CONTEXT_ID {
        return Err(SecurityError::WrongContext {
            block,
            context: asb.context_id,
            expected: CONTEXT_ID,
        });
    }
    let bad = |parameter| SecurityError::BadParameter { block, parameter };
    let mut iv = None;
    let mut variant = AesVariant::A256Gcm;
    let mut wrapped = None;
    let mut scope = SCOPE_ALL;
    for (id, value) in &asb.parameters {
        match *id {
            PARAM_IV => {
                let v = cbor::parse_bytes(value, "IV").map_err(|_| bad(*id))?;
                let v: [u8; IV_LEN] = v.as_ref().try_into().map_err(|_| bad(*id))?;
                iv = Some(v);
            }
            PARAM_AES_VARIANT => {
                variant = cbor::parse_uint(value, "AES variant")
                    .ok()
                    .and_then(AesVariant::from_code)
                    .ok_or(bad(*id))?;
            }
            PARAM_WRAPPED_KEY => {
                wrapped = Some(cbor::parse_bytes(value, "wrapped key").map_err(|_| bad(*id))?);
            }
            PARAM_SCOPE => {
                scope = cbor::parse_uint(value, "AAD scope flags").map_err(|_| bad(*id))?;
            }
            other => return Err(bad(other)),
        }
    }
    // The IV has no default: without one there is nothing to decrypt with.
    let iv = iv.ok_or(bad(PARAM_IV))?;
    let unwrapped;
    let key = match &wrapped {
        Some(w) => {
            unwrapped = unwrap_key(key, w, block)?;
            &unwrapped
        }
        None => key,
    };
    if AesVariant::for_key_len(key.len()) != Some(variant) {
        return Err(SecurityError::BadKey {
            what: "the block's AES variant",
            len: key.len(),
        });
    }
    let security_header = (BLOCK_BCB, block, flags);
    let mut plaintexts = Vec::with_capacity(asb.targets.len());
    for (&t, results) in asb.targets.iter().zip(&asb.results) {
        if !target::encryptable(bundle, t) {
            return Err(SecurityError::BadTarget { block, target: t });
        }
        let tag = results
            .iter()
            .find(|(id, _)| *id == RESULT_TAG)
            .and_then(|(_, v)| cbor::parse_bytes(v, "authentication tag").ok())
            .filter(|v| v.len() == TAG_LEN)
            .ok_or(SecurityError::MissingResult { block, target: t })?;
        let aad = target::scope_prefix(bundle, scope, target::header(bundle, t), security_header);
        let mut buf = target::data(bundle, t)
            .ok_or(SecurityError::BadTarget { block, target: t })?
            .to_vec();
        if !open(variant, key, &iv, &aad, &mut buf, &tag) {
            return Err(SecurityError::DecryptionFailed { block, target: t });
        }
        plaintexts.push((t, Bytes::from(buf)));
    }
    for (t, p) in plaintexts {
        target::set_data(bundle, t, p);
    }
    bundle.extensions.retain(|b| b.number != block);
    Ok(Decrypted {
        block,
        source: asb.source,
        targets: asb.targets,
    })
}

/// Encrypts `buf` in place; the tag.
fn seal(
    variant: AesVariant,
    key: &Key,
    iv: &[u8; IV_LEN],
    aad: &[u8],
    buf: &mut [u8],
) -> Option<[u8; TAG_LEN]> {
    let nonce = (*iv).into();
    let tag = match variant {
        AesVariant::A128Gcm => Aes128Gcm::new_from_slice(key.as_bytes())
            .ok()?
            .encrypt_inout_detached(&nonce, aad, buf.into())
            .ok()?,
        AesVariant::A256Gcm => Aes256Gcm::new_from_slice(key.as_bytes())
            .ok()?
            .encrypt_inout_detached(&nonce, aad, buf.into())
            .ok()?,
    };
    let mut out = [0u8; TAG_LEN];
    out.copy_from_slice(&tag);
    Some(out)
}

/// Decrypts `buf` in place if `tag` verifies (the AEAD compares in constant time).
fn open(
    variant: AesVariant,
    key: &Key,
    iv: &[u8; IV_LEN],
    aad: &[u8],
    buf: &mut [u8],
    tag: &[u8],
) -> bool {
    let nonce = (*iv).into();
    let Ok(tag) = <[u8; TAG_LEN]>::try_from(tag) else {
        return false;
    };
    let tag = tag.into();
    match variant {
        AesVariant::A128Gcm => Aes128Gcm::new_from_slice(key.as_bytes()).is_ok_and(|c| {
            c.decrypt_inout_detached(&nonce, aad, buf.into(), &tag)
                .is_ok()
        }),
        AesVariant::A256Gcm => Aes256Gcm::new_from_slice(key.as_bytes()).is_ok_and(|c| {
            c.decrypt_inout_detached(&nonce, aad, buf.into(), &tag)
                .is_ok()
        }),
    }
}
