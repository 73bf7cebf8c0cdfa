//! Ferry's DTN-RPC engine, sans-IO.

#![forbid(unsafe_code)]

pub mod require;
