use super::*;

#[test]
fn rates() {
    assert_eq!(reproduction_rate(&[], true), None);
    // 3 of 4 runs equal T_0 = true: 3/4.
    assert_eq!(
        reproduction_rate(&[true, true, false, true], true),
        Some(0.75)
    );
    // T_0 = false: the one false run matches: 1/4.
    assert_eq!(
        reproduction_rate(&[true, true, false, true], false),
        Some(0.25)
    );
    assert_eq!(reproduction_rate(&[false; 5], false), Some(1.0));
}

#[test]
fn classes() {
    assert_eq!(classify(1.0), Class::Reproducible);
    assert_eq!(classify(0.2), Class::Flaky);
    assert_eq!(classify(0.999_999), Class::Flaky);
    assert_eq!(classify(0.0), Class::Broken);
    assert_eq!(classify(f64::NAN), Class::Broken);
    assert_eq!(Class::Flaky.name(), "flaky");
    assert_eq!(
        serde_json::to_string(&Class::Reproducible).ok().as_deref(),
        Some("\"reproducible\"")
    );
    for c in Class::ALL {
        assert_eq!(
            serde_json::to_string(&c).ok(),
            Some(format!("\"{}\"", c.name()))
        );
    }
}
