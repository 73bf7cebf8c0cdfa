//! Requirements: the small expression language of predicates, such as
//! `battery >= 50 && has(gps) && free_disk >= 1GB`, parsed with clear errors and evaluated
//! against a server's [`Facts`].
