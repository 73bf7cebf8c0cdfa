//! The test vectors of `docs/protocol.md`: its ```` ```vector NAME ```` blocks, read from the
//! document itself so that what it prints is what the tests check. Shared by seal's
//! `tests/vectors.rs` and rpc's `tests/protocol.rs` (which includes this file by its path).
//!
//! A block lists fields in order, one per line as `name hex`; a long value goes on over the
//! lines that follow, indented; a field with no bytes is its name alone.

use std::collections::BTreeMap;

/// The document, at build time.
const PROTOCOL_MD: &str = include_str!("../../../../docs/protocol.md");

/// The fields of one block, in order.
pub(crate) type Fields = Vec<(String, Vec<u8>)>;

/// Every block of the document, by name.
pub(crate) struct Vectors(BTreeMap<String, Fields>);

impl Vectors {
    pub(crate) fn load() -> Self {
        Vectors(parse(PROTOCOL_MD))
    }

    /// The names of every block.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    pub(crate) fn block(&self, name: &str) -> &Fields {
        self.0
            .get(name)
            .unwrap_or_else(|| panic!("docs/protocol.md has no vector block {name}"))
    }

    /// The names of a block's fields, in order.
    pub(crate) fn field_names(&self, name: &str) -> Vec<&str> {
        self.block(name).iter().map(|(f, _)| f.as_str()).collect()
    }

    /// A block's fields, concatenated.
    pub(crate) fn bytes(&self, name: &str) -> Vec<u8> {
        self.block(name)
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .collect()
    }

    pub(crate) fn field(&self, block: &str, field: &str) -> &[u8] {
        self.block(block)
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, v)| &v[..])
            .unwrap_or_else(|| panic!("vector {block} has no field {field}"))
    }

    pub(crate) fn array<const N: usize>(&self, block: &str, field: &str) -> [u8; N] {
        self.field(block, field)
            .try_into()
            .unwrap_or_else(|_| panic!("vector {block}, field {field}: not {N} bytes"))
    }
}

fn parse(text: &str) -> BTreeMap<String, Fields> {
    let mut vectors = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix("```vector ") else {
            continue;
        };
        let mut fields: Fields = Vec::new();
        for line in lines.by_ref() {
            if line.starts_with("```") {
                break;
            }
            if line.trim().is_empty() {
                continue;
            }
            let continued = line.starts_with(char::is_whitespace);
            let (field, digits) = if continued {
                ("", line)
            } else {
                line.split_once(char::is_whitespace).unwrap_or((line, ""))
            };
            let digits: String = digits.split_whitespace().collect();
            let bytes = hex::decode(&digits)
                .unwrap_or_else(|e| panic!("vector {name}, field {field}: {e}"));
            if continued {
                let Some((_, value)) = fields.last_mut() else {
                    panic!("vector {name}: a continuation line comes first");
                };
                value.extend_from_slice(&bytes);
            } else {
                fields.push((field.to_string(), bytes));
            }
        }
        assert!(
            vectors.insert(name.trim().to_string(), fields).is_none(),
            "vector {name} twice"
        );
    }
    vectors
}
