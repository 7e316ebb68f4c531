//! The per-cluster resources operator's objects (see [`super`]).
