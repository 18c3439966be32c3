//! What a decoder did with a well-formed value.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Written,
    /// The value has no Feldera representation (NaN, infinity, BC, ...): `null` if the column
    /// is nullable, refused otherwise. Nothing was written.
    Null {
        why: &'static str,
    },
}
