//! The abstract security block (RFC 9172 §3.6): the block-type-specific data of every BIB and
//! BCB, a CBOR sequence of security targets, context id, context flags, security source,
//! optional context parameters and the results per target.

use bytes::Bytes;
use wire::Eid;

use crate::cbor::{self, Reader};
use crate::error::AsbError;

/// Most security targets one block may name. A bundle has few blocks; an ASB that names more
/// is refused before anything is allocated for them.
pub const MAX_TARGETS: usize = 64;
/// Most context parameters one block may carry (RFC 9173's contexts define four).
pub const MAX_PARAMETERS: usize = 16;
/// Most results one target may have (RFC 9173's contexts define one).
pub const MAX_RESULTS: usize = 16;

/// Security context flag: the context parameters field is present.
pub const FLAG_PARAMETERS_PRESENT: u64 = 0x01;

/// One context parameter or result: its id and its value as the CBOR item it is on the wire
/// (its meaning is the context's).
pub type Item = (u64, Bytes);

/// An abstract security block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbstractSecurityBlock {
    /// Block numbers of the targets, each once, at least one.
    pub targets: Vec<u64>,
    /// The security context (RFC 9173: 1 is BIB-HMAC-SHA2, 2 is BCB-AES-GCM; negative ids are
    /// for private use).
    pub context_id: i64,
    /// The security context flags; [`FLAG_PARAMETERS_PRESENT`] is derived from `parameters`
    /// when encoding, other bits are kept.
    pub context_flags: u64,
    /// The node that added the block.
    pub source: Eid,
    /// Context parameters, ids unique.
    pub parameters: Vec<Item>,
    /// Results, one list per target, in the order of `targets`.
    pub results: Vec<Vec<Item>>,
}

impl AbstractSecurityBlock {
    /// The parameter `id`'s value, if present.
    pub fn parameter(&self, id: u64) -> Option<&Bytes> {
        self.parameters
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, v)| v)
    }

    /// The results for `target`, if it is a target.
    pub fn results_for(&self, target: u64) -> Option<&[Item]> {
        let i = self.targets.iter().position(|t| *t == target)?;
        self.results.get(i).map(Vec::as_slice)
    }

    /// Decodes the block-type-specific data of a BIB or BCB. Never panics; allocates at most
    /// what the bounds above allow; refuses anything RFC 9172 §3.6 does not allow.
    pub fn decode(data: &Bytes) -> Result<Self, AsbError> {
        let mut r = Reader::new(data);
        let n = r.array("security targets", MAX_TARGETS)?;
        if n == 0 {
            return Err(AsbError::Invalid("no security target"));
        }
        let mut targets = Vec::with_capacity(n);
        for _ in 0..n {
            let t = r.uint("security target")?;
            if targets.contains(&t) {
                return Err(AsbError::Invalid("a security target named twice"));
            }
            targets.push(t);
        }
        let context_id = r.int("security context id")?;
        let context_flags = r.uint("security context flags")?;
        let (source, used) = Eid::decode_prefix(&r.rest()).map_err(AsbError::BadSource)?;
        r.advance(used);
        let parameters = if context_flags & FLAG_PARAMETERS_PRESENT != 0 {
            let parameters = read_items(&mut r, "context parameters", MAX_PARAMETERS)?;
            for (i, (id, _)) in parameters.iter().enumerate() {
                if parameters[..i].iter().any(|(other, _)| other == id) {
                    return Err(AsbError::Invalid("a context parameter given twice"));
                }
            }
            parameters
        } else {
            Vec::new()
        };
        let m = r.array("security results", MAX_TARGETS)?;
        if m != targets.len() {
            return Err(AsbError::Invalid("not one results list per target"));
        }
        let mut results = Vec::with_capacity(m);
        for _ in 0..m {
            results.push(read_items(&mut r, "target results", MAX_RESULTS)?);
        }
        if !r.is_empty() {
            return Err(AsbError::Invalid("bytes after the security results"));
        }
        Ok(Self {
            targets,
            context_id,
            context_flags,
            source,
            parameters,
            results,
        })
    }

    /// The encoding (deterministic CBOR, parameters and results in the order held).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.results.len() * 72);
        cbor::put_array(&mut out, self.targets.len());
        for t in &self.targets {
            cbor::put_uint(&mut out, *t);
        }
        cbor::put_int(&mut out, self.context_id);
        let flags = if self.parameters.is_empty() {
            self.context_flags & !FLAG_PARAMETERS_PRESENT
        } else {
            self.context_flags | FLAG_PARAMETERS_PRESENT
        };
        cbor::put_uint(&mut out, flags);
        self.source.encode_cbor(&mut out);
        if !self.parameters.is_empty() {
            put_items(&mut out, &self.parameters);
        }
        cbor::put_array(&mut out, self.results.len());
        for r in &self.results {
            put_items(&mut out, r);
        }
        out
    }
}

/// An array of `[id, value]` pairs.
fn read_items(r: &mut Reader<'_>, what: &'static str, max: usize) -> Result<Vec<Item>, AsbError> {
    let n = r.array(what, max)?;
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        let at = r.position();
        if r.array(what, 2)? != 2 {
            return Err(AsbError::Unexpected {
                at,
                what: "an [id, value] pair",
            });
        }
        let id = r.uint("parameter or result id")?;
        items.push((id, r.item()?));
    }
    Ok(items)
}

fn put_items(out: &mut Vec<u8>, items: &[Item]) {
    cbor::put_array(out, items.len());
    for (id, value) in items {
        cbor::put_array(out, 2);
        cbor::put_uint(out, *id);
        out.extend_from_slice(value);
    }
}
