//! COPY text-format rows (`COPY ... TO STDOUT`): fields split on tabs, `\N` for null, and
//! backslash escapes, feeding the same value decoder as pgoutput.
