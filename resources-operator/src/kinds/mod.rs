//! The kind adapters: one file per resource kind, each one implementation of
//! [`crate::engine::kind::KindAdapter`]. So far: [`cache`], [`template`].

pub mod cache;
pub mod template;
