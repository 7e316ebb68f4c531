//! The Infinispan server's objects (see [`super`]).
