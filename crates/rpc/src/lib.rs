//! Ferry's DTN-RPC engine, sans-IO.

#![forbid(unsafe_code)]

pub mod require;

use std::fmt;
use std::str::FromStr;

/// The declared type of a procedure's parameter (in the node's configuration), checked against
/// a call's [`wire::rpc::Value`]s before anything runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ParamType {
    /// `bool`: true or false.
    Bool,
    /// `int`: a signed 64-bit integer.
    Int,
    /// `float`: a number (an int is accepted too).
    Float,
    /// `text`: UTF-8 text without NUL.
    Text,
    /// `bytes`: arbitrary bytes (the procedure receives them as a file path).
    Bytes,
    /// `file`: a file on the data channel (the procedure receives its path).
    File,
}

impl ParamType {
    /// Every type, in a fixed order.
    pub const ALL: [ParamType; 6] = [
        ParamType::Bool,
        ParamType::Int,
        ParamType::Float,
        ParamType::Text,
        ParamType::Bytes,
        ParamType::File,
    ];

    /// The name used in configuration files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ParamType::Bool => "bool",
            ParamType::Int => "int",
            ParamType::Float => "float",
            ParamType::Text => "text",
            ParamType::Bytes => "bytes",
            ParamType::File => "file",
        }
    }
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A type name that is not one of `bool`, `int`, `float`, `text`, `bytes`, `file`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown parameter type `{0}` (expected bool, int, float, text, bytes or file)")]
pub struct UnknownParamType(pub String);

impl FromStr for ParamType {
    type Err = UnknownParamType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ParamType::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| UnknownParamType(s.to_string()))
    }
}
