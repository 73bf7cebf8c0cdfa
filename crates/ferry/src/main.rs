//! The `ferry` binary. For now it demonstrates the wire formats.
fn main() {}
