//! The adapters of the five resource kinds (one [`crate::engine::kind::KindAdapter`] each).

pub mod cache;
pub mod counter;
pub mod json_text;
pub mod schema;
pub mod task;
pub mod template;
