//! The CEL environment: device values of each attribute type, quantities, versions,
//! and the compile-time and runtime errors.

use crate::dra::cel::{
    CompileError, DeviceValue, EvalError, FUNCTIONS, MAX_EXPRESSION_LENGTH, Selector,
};

use super::builders::{DRIVER, DeviceExt, device};

/// A device of [`DRIVER`] with one attribute of each type and two capacities.
fn gpu() -> DeviceValue {
    let d = device("gpu-0")
        .string("model", "a100")
        .int("cores", 108)
        .boolean("mig", true)
        .version("driverVersion", "1.2.3-rc.1")
        .string("other.io/vendor", "acme")
        .capacity("memory", "80Gi")
        .capacity("other.io/bandwidth", "1500m");
    DeviceValue::build(
        DRIVER,
        &d.attributes.unwrap_or_default(),
        &d.capacity.unwrap_or_default(),
        false,
    )
    .expect("a valid device")
}

fn eval(expression: &str) -> Result<bool, EvalError> {
    Selector::compile(expression).matches(&gpu())
}

#[track_caller]
fn holds(expression: &str) {
    assert_eq!(eval(expression), Ok(true), "{expression}");
}

#[track_caller]
fn fails(expression: &str) {
    assert_eq!(eval(expression), Ok(false), "{expression}");
}

fn compile_error(expression: &str) -> CompileError {
    match Selector::compile(expression).error() {
        Some(e) => e.clone(),
        None => panic!("{expression} compiled"),
    }
}

#[test]
fn attributes_of_each_type_are_read_under_their_domain() {
    holds(r#"device.driver == "gpu.example.com""#);
    holds(r#"device.attributes["gpu.example.com"].model == "a100""#);
    fails(r#"device.attributes["gpu.example.com"].model == "h100""#);
    holds(r#"device.attributes["gpu.example.com"].cores > 100"#);
    fails(r#"device.attributes["gpu.example.com"].cores > 108"#);
    holds(r#"device.attributes["gpu.example.com"].mig"#);
    holds(r#"device.attributes["other.io"].vendor == "acme""#);
    holds(r#"!("vendor" in device.attributes["gpu.example.com"])"#);
    holds(r#"device.allowMultipleAllocations == false"#);
    holds(
        r#"device.attributes["gpu.example.com"].model.startsWith("a1") && device.attributes["gpu.example.com"].model.matches("^a[0-9]+$")"#,
    );
}

#[test]
fn an_absent_domain_reads_as_an_empty_map() {
    holds(r#"size(device.attributes["nothing.io"]) == 0"#);
    holds(r#"!has(device.attributes["gpu.example.com"].missing)"#);
}

#[test]
fn capacities_compare_as_quantities() {
    holds(r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("80Gi")) == 0"#);
    holds(r#"device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("40Gi"))"#);
    fails(r#"device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("81Gi"))"#);
    holds(r#"device.capacity["gpu.example.com"].memory.isLessThan(quantity("100G"))"#);
    holds(r#"device.capacity["gpu.example.com"].memory == quantity("85899345920")"#);
    holds(r#"device.capacity["gpu.example.com"].memory.asInteger() == 85899345920"#);
    holds(r#"device.capacity["other.io"].bandwidth.isGreaterThan(quantity("1"))"#);
    holds(
        r#"!device.capacity["other.io"].bandwidth.isInteger() && isQuantity("2Ki") && !isQuantity("2 Ki")"#,
    );
    assert!(matches!(
        eval(r#"device.capacity["other.io"].bandwidth.asInteger() == 1"#),
        Err(EvalError::Runtime(_))
    ));
}

#[test]
fn versions_compare_as_semantic_versions() {
    let v = r#"device.attributes["gpu.example.com"].driverVersion"#;
    holds(&format!(r#"{v}.isLessThan(semver("1.2.3"))"#));
    holds(&format!(r#"{v}.isGreaterThan(semver("1.2.3-beta.9"))"#));
    holds(&format!(r#"{v}.isGreaterThan(semver("1.2.3-rc.0"))"#));
    holds(&format!(r#"{v}.compareTo(semver("1.10.0")) == -1"#));
    holds(&format!(
        r#"{v}.major() == 1 && {v}.minor() == 2 && {v}.patch() == 3"#
    ));
    holds(&format!(r#"{v} == semver("1.2.3-rc.1+build.5")"#));
    holds(r#"isSemver("1.0.0") && !isSemver("01.0.0") && !isSemver("1.0")"#);
}

#[test]
fn a_missing_key_is_a_runtime_error_and_a_number_is_not_a_bool() {
    match eval(r#"device.attributes["gpu.example.com"].missing == 1"#) {
        Err(EvalError::Runtime(message)) => assert!(message.contains("missing"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(eval("1 + 1"), Err(EvalError::NotBool(_))));
    assert!(matches!(
        eval(r#"quantity("x") == quantity("1")"#),
        Err(EvalError::Runtime(_))
    ));
}

#[test]
fn what_the_environment_lacks_fails_to_compile() {
    assert!(matches!(
        compile_error("device.driver =="),
        CompileError::Syntax(_)
    ));
    assert_eq!(
        compile_error(r#"quantity("1").add(quantity("2")) == quantity("3")"#),
        CompileError::UnsupportedFunction("add".to_owned())
    );
    assert_eq!(
        compile_error(r#"cel.bind(x, 1, x == 1)"#),
        CompileError::UnsupportedFunction("bind".to_owned())
    );
    assert_eq!(
        compile_error("node.name == 'a'"),
        CompileError::UnknownVariable("node".to_owned())
    );
    assert_eq!(
        compile_error("device.name == 'a'"),
        CompileError::NoSuchField("name".to_owned())
    );
    assert!(matches!(
        compile_error("device.attributes.?x"),
        CompileError::Syntax(_)
    ));
    let long = format!("{}true", "true && ".repeat(MAX_EXPRESSION_LENGTH / 8));
    assert!(matches!(compile_error(&long), CompileError::TooLong { .. }));
}

#[test]
fn nested_comprehensions_over_large_lists_are_too_costly() {
    let list = format!("[{}]", vec!["1"; 200].join(","));
    let two = format!("{list}.all(x, {list}.all(y, x == y))");
    assert_eq!(
        Selector::compile(&two).error(),
        None,
        "40,000 steps are fine"
    );
    let three = format!("{list}.all(x, {list}.all(y, {list}.all(z, x == z)))");
    assert!(matches!(
        compile_error(&three),
        CompileError::TooCostly { .. }
    ));
}

#[test]
fn deep_nesting_fails_to_compile() {
    let nested = |n: usize| format!("{}true{}", "!(".repeat(n), ")".repeat(n));
    holds(&nested(30));
    assert_eq!(
        compile_error(&nested(40)),
        CompileError::TooDeep { max: 32 }
    );
    let sum = |n: usize| format!("{} > 0", vec!["1"; n].join(" + "));
    holds(&sum(20));
    assert_eq!(compile_error(&sum(2000)), CompileError::TooDeep { max: 32 });
    holds(&vec!["true"; 200].join(" && "));
}

/// The interpreter's error for `expression`, compiled without TAS's checks.
fn unchecked_error(expression: &str) -> String {
    let env = crate::dra::cel::env();
    let program = env.compile(expression).expect("parses");
    match program.execute(&::cel::Context::with_env(std::sync::Arc::clone(env))) {
        Ok(value) => format!("{value:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_offered_function_exists_in_the_environment() {
    // Called with arguments of the wrong type, a declared function fails with an
    // overload error, an undeclared one with an undeclared reference.
    assert!(unchecked_error("nosuch(true)").contains("Undeclared"));
    assert!(unchecked_error("true.nosuch()").contains("Undeclared"));
    for function in FUNCTIONS
        .iter()
        .filter(|f| f.chars().all(|c| c.is_ascii_alphabetic()))
    {
        let global = unchecked_error(&format!("{function}([], [], [])"));
        let member = unchecked_error(&format!("[].{function}([], [])"));
        assert!(
            !global.contains("Undeclared") || !member.contains("Undeclared"),
            "{function}: {global} / {member}"
        );
    }
}
