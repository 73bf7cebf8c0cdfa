//! A bundle's blocks as BPSec sees them: targets by block number (0 the primary block, 1 the
//! payload), their headers and block-type-specific data, and the scope fields shared by the
//! IPPT of BIB-HMAC-SHA2 (RFC 9173 §3.7) and the AAD of BCB-AES-GCM (RFC 9173 §4.7).

use bytes::Bytes;
use wire::{BLOCK_BUNDLE_AGE, BLOCK_HOP_COUNT, BLOCK_PREVIOUS_NODE, Bundle, ExtensionData};

use crate::asb::AbstractSecurityBlock;
use crate::cbor;
use crate::error::SecurityError;
use crate::{BLOCK_BCB, BLOCK_BIB};

/// Scope flag: include the primary block.
pub const SCOPE_PRIMARY: u64 = 0x01;
/// Scope flag: include the target's header (type, number, flags).
pub const SCOPE_TARGET_HEADER: u64 = 0x02;
/// Scope flag: include the security block's header.
pub const SCOPE_SECURITY_HEADER: u64 = 0x04;
/// Every scope flag: the default of both contexts (RFC 9173 §3.3.3, §4.3.4).
pub const SCOPE_ALL: u64 = SCOPE_PRIMARY | SCOPE_TARGET_HEADER | SCOPE_SECURITY_HEADER;

/// A block's header as the scope fields carry it: type code, number, processing flags.
pub(crate) type Header = (u64, u64, u64);

/// The header of block `number` (`None` for the primary block, which has none, or a block the
/// bundle lacks).
pub(crate) fn header(bundle: &Bundle, number: u64) -> Option<Header> {
    match number {
        0 => None,
        wire::PAYLOAD_BLOCK_NUMBER => Some((
            wire::BLOCK_PAYLOAD,
            wire::PAYLOAD_BLOCK_NUMBER,
            bundle.payload.flags.0,
        )),
        n => bundle
            .extensions
            .iter()
            .find(|b| b.number == n)
            .map(|b| (b.data.block_type(), b.number, b.flags.0)),
    }
}

/// The data a security operation covers for target `number`: a block's block-type-specific data,
/// or the primary block's canonical encoding (RFC 9172 §3.7).
pub(crate) fn data(bundle: &Bundle, number: u64) -> Option<Bytes> {
    match number {
        0 => Some(Bytes::from(bundle.primary.to_cbor())),
        wire::PAYLOAD_BLOCK_NUMBER => Some(bundle.payload.data.clone()),
        n => bundle
            .extensions
            .iter()
            .find(|b| b.number == n)
            .map(|b| b.data.content_bytes()),
    }
}

/// Replaces target `number`'s block-type-specific data (the BCB's ciphertext or plaintext).
/// Only for the blocks [`encryptable`] allows.
pub(crate) fn set_data(bundle: &mut Bundle, number: u64, new: Bytes) {
    if number == wire::PAYLOAD_BLOCK_NUMBER {
        bundle.payload.data = new;
    } else if let Some(b) = bundle.extensions.iter_mut().find(|b| b.number == number) {
        let block_type = b.data.block_type();
        b.data = ExtensionData::Unknown {
            block_type,
            data: new,
        };
    }
}

/// Removes the CRC of target `number` (not the primary block's): RFC 9172 §3.8 and §3.9 ask
/// it of every BIB and BCB target, whose integrity the MAC or the tag then guards.
pub(crate) fn clear_crc(bundle: &mut Bundle, number: u64) {
    if number == wire::PAYLOAD_BLOCK_NUMBER {
        bundle.payload.crc_type = wire::CrcType::None;
    } else if let Some(b) = bundle.extensions.iter_mut().find(|b| b.number == number) {
        b.crc_type = wire::CrcType::None;
    }
}

/// Whether block `number` may be a BCB's target: the payload, a BIB, or a block `wire` keeps as
/// bytes. Not the primary block (RFC 9172 §3.9), not a BCB, and not the blocks `wire` parses
/// (previous node, bundle age, hop count: every node on the way must read them, and ciphertext
/// there would make the bundle undecodable).
pub(crate) fn encryptable(bundle: &Bundle, number: u64) -> bool {
    match header(bundle, number) {
        None => false,
        Some((t, _, _)) => !matches!(
            t,
            BLOCK_BCB | BLOCK_PREVIOUS_NODE | BLOCK_BUNDLE_AGE | BLOCK_HOP_COUNT
        ),
    }
}

/// The fields that precede the target's data in an IPPT, and make up an AAD: the scope flags,
/// then as they ask the primary block, the target's header and the security block's header.
pub(crate) fn scope_prefix(
    bundle: &Bundle,
    scope: u64,
    target_header: Option<Header>,
    security_header: Header,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    cbor::put_uint(&mut out, scope);
    if scope & SCOPE_PRIMARY != 0 {
        out.extend_from_slice(&bundle.primary.to_cbor());
    }
    if scope & SCOPE_TARGET_HEADER != 0
        && let Some((t, n, f)) = target_header
    {
        cbor::put_uint(&mut out, t);
        cbor::put_uint(&mut out, n);
        cbor::put_uint(&mut out, f);
    }
    if scope & SCOPE_SECURITY_HEADER != 0 {
        let (t, n, f) = security_header;
        cbor::put_uint(&mut out, t);
        cbor::put_uint(&mut out, n);
        cbor::put_uint(&mut out, f);
    }
    out
}

/// The abstract security blocks of the bundle's BIBs and BCBs, with their block numbers and
/// types. A malformed one is an error: rules about targets cannot be checked past it.
pub(crate) fn security_blocks(
    bundle: &Bundle,
) -> Result<Vec<(u64, u64, AbstractSecurityBlock)>, SecurityError> {
    let mut out = Vec::new();
    for b in &bundle.extensions {
        let t = b.data.block_type();
        if t != BLOCK_BIB && t != BLOCK_BCB {
            continue;
        }
        let ExtensionData::Unknown { data, .. } = &b.data else {
            continue;
        };
        match AbstractSecurityBlock::decode(data) {
            Ok(asb) => out.push((b.number, t, asb)),
            // An encrypted BIB's data is ciphertext: its ASB is read once it is decrypted.
            Err(_) if t == BLOCK_BIB && encrypted_by_bcb(bundle, b.number) => {}
            Err(error) => {
                return Err(SecurityError::Malformed {
                    block: b.number,
                    error,
                });
            }
        }
    }
    Ok(out)
}

/// Whether a BCB of the bundle names `number` among its targets (BCBs that do not decode name
/// nothing).
pub(crate) fn encrypted_by_bcb(bundle: &Bundle, number: u64) -> bool {
    bundle.extensions.iter().any(|b| match &b.data {
        ExtensionData::Unknown {
            block_type: BLOCK_BCB,
            data,
        } => AbstractSecurityBlock::decode(data).is_ok_and(|asb| asb.targets.contains(&number)),
        _ => false,
    })
}
