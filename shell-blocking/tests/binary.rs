//! `slotline-blocking` as a child process (checks shared with `slotline`).

mod binary_checks;

const BIN: &str = env!("CARGO_BIN_EXE_slotline-blocking");

#[test]
fn help_exits_0_and_lists_every_variable_with_its_default() {
    binary_checks::help_exits_0_and_lists_every_variable_with_its_default(BIN);
}

#[test]
fn version_exits_0_and_names_the_binary() {
    binary_checks::version_exits_0_and_names_the_binary(BIN, "slotline-blocking");
}

#[test]
fn bad_value_exits_2_naming_the_variable_before_any_side_effect() {
    binary_checks::bad_value_exits_2_naming_the_variable_before_any_side_effect(BIN);
}

#[test]
fn bad_flag_value_exits_2_like_the_variable() {
    binary_checks::bad_flag_value_exits_2_like_the_variable(BIN);
}

#[test]
fn missing_required_option_exits_2_naming_it() {
    binary_checks::missing_required_option_exits_2_naming_it(BIN);
}

#[test]
fn unknown_flag_exits_2() {
    binary_checks::unknown_flag_exits_2(BIN);
}

#[test]
fn sigterm_stops_promptly() {
    binary_checks::sigterm_stops_promptly(BIN);
}
