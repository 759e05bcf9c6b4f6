//! The quickstart as a user runs it: `examples/quickstart/run.sh --smoke` goes from two
//! image pushes and a CI webhook through auto-promotion to dev, a promotion to staging, an
//! approval and a promotion to prod, and checks that `stage/prod` holds the newest digest.
//! (run.sh only installs, builds and then runs this same driver binary.)

use std::process::Command;

#[test]
fn the_quickstart_smoke_run_reaches_prod() {
    let output = Command::new(env!("CARGO_BIN_EXE_quickstart"))
        .arg("--smoke")
        .output()
        .expect("the quickstart driver runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{text}");
    assert!(text.contains("promoted by auto-promotion"), "{text}");
    assert!(
        text.contains("smoke: ok — stage/prod holds demo/app:1.1.0@sha256:"),
        "{text}"
    );
}
