//! BIB-HMAC-SHA2 (RFC 9173 §3): a Block Integrity Block whose results are HMACs of each
//! target's integrity-protected plaintext (IPPT, §3.7).

use bytes::Bytes;
use hmac::{Hmac, KeyInit, Mac};
use sha2_bpsec::{Sha256, Sha384, Sha512};
use wire::{BlockFlags, Bundle, Eid, ExtensionBlock, ExtensionData};

use crate::asb::{AbstractSecurityBlock, FLAG_PARAMETERS_PRESENT};
use crate::cbor;
use crate::error::SecurityError;
use crate::key::{Key, unwrap_key, wrap_key};
use crate::target::{self, SCOPE_ALL};
use crate::{BLOCK_BCB, BLOCK_BIB};

/// The security context id of BIB-HMAC-SHA2.
pub const CONTEXT_ID: i64 = 1;
/// Parameter: SHA variant.
pub const PARAM_SHA_VARIANT: u64 = 1;
/// Parameter: wrapped key.
pub const PARAM_WRAPPED_KEY: u64 = 2;
/// Parameter: integrity scope flags.
pub const PARAM_SCOPE: u64 = 3;
/// Result: the expected HMAC.
pub const RESULT_HMAC: u64 = 1;

/// The SHA variant (RFC 9173 §3.3.1; codes from COSE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ShaVariant {
    /// HMAC 256/256.
    Sha256,
    /// HMAC 384/384, the default.
    Sha384,
    /// HMAC 512/512.
    Sha512,
}

impl ShaVariant {
    /// The parameter's value.
    pub fn code(self) -> u64 {
        match self {
            ShaVariant::Sha256 => 5,
            ShaVariant::Sha384 => 6,
            ShaVariant::Sha512 => 7,
        }
    }

    /// The variant of a parameter value.
    pub fn from_code(code: u64) -> Option<Self> {
        match code {
            5 => Some(ShaVariant::Sha256),
            6 => Some(ShaVariant::Sha384),
            7 => Some(ShaVariant::Sha512),
            _ => None,
        }
    }
}

/// How a BIB is made: the variant, the integrity scope flags, the key and whether it travels
/// wrapped.
#[derive(Debug, Clone, Copy)]
pub struct SignSpec<'a> {
    /// Block number of the new BIB.
    pub block_number: u64,
    /// Its processing flags.
    pub flags: BlockFlags,
    /// The security source (this node).
    pub source: &'a Eid,
    /// The SHA variant.
    pub sha: ShaVariant,
    /// Integrity scope flags ([`crate::SCOPE_ALL`] and its parts).
    pub scope: u64,
    /// The HMAC key.
    pub key: &'a Key,
    /// If set, the HMAC key travels in the block wrapped under this key-encryption key, which
    /// is then the one the verifier holds (RFC 9173 §3.3.2).
    pub wrap_under: Option<&'a Key>,
}

/// Makes a BIB over `targets` of `bundle` (RFC 9172 §3.8's rules checked: each target exists,
/// is no security block, has no BIB yet and is not encrypted) and removes the targets' CRCs,
/// as §3.8 asks (the MAC covers what they did). The caller inserts the BIB.
pub fn sign(
    bundle: &mut Bundle,
    targets: &[u64],
    spec: &SignSpec<'_>,
) -> Result<ExtensionBlock, SecurityError> {
    let block = spec.block_number;
    let existing = target::security_blocks(bundle)?;
    for &t in targets {
        let allowed = t == 0
            || target::header(bundle, t)
                .is_some_and(|(ty, _, _)| ty != BLOCK_BIB && ty != BLOCK_BCB);
        if !allowed || targets.iter().filter(|x| **x == t).count() > 1 {
            return Err(SecurityError::BadTarget { block, target: t });
        }
        if existing.iter().any(|(_, _, asb)| asb.targets.contains(&t)) {
            return Err(SecurityError::Conflict { block, target: t });
        }
    }
    if targets.is_empty() {
        return Err(SecurityError::BadTarget { block, target: 0 });
    }
    let security_header = (BLOCK_BIB, block, spec.flags.0);
    for &t in targets {
        if t != 0 {
            target::clear_crc(bundle, t);
        }
    }
    let mut results = Vec::with_capacity(targets.len());
    for &t in targets {
        let mac = compute(bundle, t, spec.scope, security_header, spec.sha, spec.key)
            .ok_or(SecurityError::BadTarget { block, target: t })?;
        results.push(vec![(RESULT_HMAC, cbor::bytes_item(&mac))]);
    }
    let mut parameters = vec![(PARAM_SHA_VARIANT, cbor::uint_item(spec.sha.code()))];
    if let Some(kek) = spec.wrap_under {
        parameters.push((
            PARAM_WRAPPED_KEY,
            cbor::bytes_item(&wrap_key(kek, spec.key)?),
        ));
    }
    parameters.push((PARAM_SCOPE, cbor::uint_item(spec.scope)));
    let asb = AbstractSecurityBlock {
        targets: targets.to_vec(),
        context_id: CONTEXT_ID,
        context_flags: FLAG_PARAMETERS_PRESENT,
        source: spec.source.clone(),
        parameters,
        results,
    };
    Ok(ExtensionBlock {
        flags: spec.flags,
        ..ExtensionBlock::new(
            block,
            ExtensionData::Unknown {
                block_type: BLOCK_BIB,
                data: Bytes::from(asb.encode()),
            },
        )
    })
}

/// The parameters of a received BIB, defaults applied (RFC 9173 §3.3).
struct Params {
    sha: ShaVariant,
    scope: u64,
    wrapped: Option<Bytes>,
}

fn params(asb: &AbstractSecurityBlock, block: u64) -> Result<Params, SecurityError> {
    let bad = |parameter| SecurityError::BadParameter { block, parameter };
    let mut p = Params {
        sha: ShaVariant::Sha384,
        scope: SCOPE_ALL,
        wrapped: None,
    };
    for (id, value) in &asb.parameters {
        match *id {
            PARAM_SHA_VARIANT => {
                p.sha = cbor::parse_uint(value, "SHA variant")
                    .ok()
                    .and_then(ShaVariant::from_code)
                    .ok_or(bad(*id))?;
            }
            PARAM_WRAPPED_KEY => {
                p.wrapped = Some(cbor::parse_bytes(value, "wrapped key").map_err(|_| bad(*id))?);
            }
            PARAM_SCOPE => {
                p.scope = cbor::parse_uint(value, "integrity scope flags").map_err(|_| bad(*id))?;
            }
            // RFC 9173 defines no others; an unknown parameter could change what the MAC
            // means, so the block is not taken as verified.
            other => return Err(bad(other)),
        }
    }
    Ok(p)
}

/// The security source and targets of a BIB that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The BIB's block number.
    pub block: u64,
    /// Who added it.
    pub source: Eid,
    /// What it covers.
    pub targets: Vec<u64>,
}

/// Verifies BIB `bib_number` of `bundle` with `key` (the HMAC key, or the key-encryption key
/// when the block carries a wrapped key). Every target's MAC must verify; comparisons are
/// constant-time.
pub fn verify(bundle: &Bundle, bib_number: u64, key: &Key) -> Result<Verified, SecurityError> {
    let (flags, asb) = read(bundle, bib_number)?;
    let p = params(&asb, bib_number)?;
    let unwrapped;
    let key = match &p.wrapped {
        Some(w) => {
            unwrapped = unwrap_key(key, w, bib_number)?;
            &unwrapped
        }
        None => key,
    };
    let security_header = (BLOCK_BIB, bib_number, flags);
    for (&t, results) in asb.targets.iter().zip(&asb.results) {
        let expected = results
            .iter()
            .find(|(id, _)| *id == RESULT_HMAC)
            .and_then(|(_, v)| cbor::parse_bytes(v, "HMAC").ok())
            .ok_or(SecurityError::MissingResult {
                block: bib_number,
                target: t,
            })?;
        if t != 0 && target::header(bundle, t).is_none() {
            return Err(SecurityError::BadTarget {
                block: bib_number,
                target: t,
            });
        }
        let ok = check(bundle, t, p.scope, security_header, p.sha, key, &expected).ok_or(
            SecurityError::BadTarget {
                block: bib_number,
                target: t,
            },
        )?;
        if !ok {
            return Err(SecurityError::IntegrityFailed {
                block: bib_number,
                target: t,
            });
        }
    }
    Ok(Verified {
        block: bib_number,
        source: asb.source,
        targets: asb.targets,
    })
}

/// The flags and decoded ASB of BIB `number`.
pub(crate) fn read(
    bundle: &Bundle,
    number: u64,
) -> Result<(u64, AbstractSecurityBlock), SecurityError> {
    let b = bundle
        .extensions
        .iter()
        .find(|b| b.number == number)
        .ok_or(SecurityError::NoSuchBlock(number))?;
    let ExtensionData::Unknown {
        block_type: BLOCK_BIB,
        data,
    } = &b.data
    else {
        return Err(SecurityError::NoSuchBlock(number));
    };
    let asb = AbstractSecurityBlock::decode(data).map_err(|error| SecurityError::Malformed {
        block: number,
        error,
    })?;
    if asb.context_id != CONTEXT_ID {
        return Err(SecurityError::WrongContext {
            block: number,
            context: asb.context_id,
            expected: CONTEXT_ID,
        });
    }
    Ok((b.flags.0, asb))
}

/// The IPPT of target `t` fed to an HMAC: scope fields, then the target's data as a CBOR byte
/// string, without assembling the payload into a new buffer. `None` if the target is absent.
fn feed<M: Mac>(
    mac: &mut M,
    bundle: &Bundle,
    t: u64,
    scope: u64,
    security_header: target::Header,
) -> Option<()> {
    let data = target::data(bundle, t)?;
    let mut prefix =
        target::scope_prefix(bundle, scope, target::header(bundle, t), security_header);
    let mut head = Vec::with_capacity(9);
    cbor::put_head(&mut head, 2, data.len() as u64);
    prefix.extend_from_slice(&head);
    mac.update(&prefix);
    mac.update(&data);
    Some(())
}

fn compute(
    bundle: &Bundle,
    t: u64,
    scope: u64,
    security_header: target::Header,
    sha: ShaVariant,
    key: &Key,
) -> Option<Vec<u8>> {
    fn run<M: Mac + KeyInit>(
        key: &Key,
        bundle: &Bundle,
        t: u64,
        scope: u64,
        h: target::Header,
    ) -> Option<Vec<u8>> {
        let mut mac = <M as KeyInit>::new_from_slice(key.as_bytes()).ok()?;
        feed(&mut mac, bundle, t, scope, h)?;
        Some(mac.finalize().into_bytes().to_vec())
    }
    match sha {
        ShaVariant::Sha256 => run::<Hmac<Sha256>>(key, bundle, t, scope, security_header),
        ShaVariant::Sha384 => run::<Hmac<Sha384>>(key, bundle, t, scope, security_header),
        ShaVariant::Sha512 => run::<Hmac<Sha512>>(key, bundle, t, scope, security_header),
    }
}

/// Whether target `t`'s MAC is `expected` (`None` if the target is absent).
fn check(
    bundle: &Bundle,
    t: u64,
    scope: u64,
    security_header: target::Header,
    sha: ShaVariant,
    key: &Key,
    expected: &[u8],
) -> Option<bool> {
    fn run<M: Mac + KeyInit>(
        key: &Key,
        bundle: &Bundle,
        t: u64,
        scope: u64,
        h: target::Header,
        expected: &[u8],
    ) -> Option<bool> {
        let mut mac = <M as KeyInit>::new_from_slice(key.as_bytes()).ok()?;
        feed(&mut mac, bundle, t, scope, h)?;
        Some(mac.verify_slice(expected).is_ok())
    }
    match sha {
        ShaVariant::Sha256 => run::<Hmac<Sha256>>(key, bundle, t, scope, security_header, expected),
        ShaVariant::Sha384 => run::<Hmac<Sha384>>(key, bundle, t, scope, security_header, expected),
        ShaVariant::Sha512 => run::<Hmac<Sha512>>(key, bundle, t, scope, security_header, expected),
    }
}
