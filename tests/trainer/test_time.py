import pytest

from foundry.plugins.errors import ConfigError
from foundry.trainer.time import Time, TimeUnit, Timestamp, crossed


@pytest.mark.parametrize("text,value,unit", [("10ba", 10, "ba"), ("2ep", 2, "ep"), ("1000sp", 1000, "sp"),
                                             ("1e6tok", 1000000, "tok"), ("0.25dur", 0.25, "dur"), (" 3 ba ", 3, "ba")])
def test_parse(text, value, unit):
    t = Time.parse(text)
    assert (t.value, t.unit) == (value, TimeUnit(unit))


@pytest.mark.parametrize("bad", ["10", "ba", "10 batches", "-1ba", "1.5ba", "2dur", "", None, 3.0, True])
def test_bad_strings_are_clear_config_errors(bad):
    with pytest.raises(ConfigError) as err:
        Time.parse(bad)
    assert "invalid time" in str(err.value) or "dur" in str(err.value)


def test_int_with_default_unit_and_dur_resolution():
    assert Time.parse(5, TimeUnit.BATCH) == Time(5, TimeUnit.BATCH)
    assert Time.parse("0.1dur").resolve(Time.parse("95ba")) == Time(10, TimeUnit.BATCH)
    assert Time.parse("0.5dur").to_batches(Time.parse("2ep"), batches_per_epoch=10) == 10
    with pytest.raises(ConfigError):
        Time.parse("1ep").to_batches()
    with pytest.raises(ConfigError):
        Time.parse("100sp").to_batches()


def test_timestamp_counts_and_state():
    ts = Timestamp()
    for _ in range(3):
        ts.after_batch(samples=8, tokens=64, seconds=0.5)
    ts.after_epoch()
    ts.after_batch(8, 64, 0.5)
    assert (ts.epoch, ts.batch, ts.sample, ts.token, ts.batch_in_epoch, ts.sample_in_epoch) == (1, 4, 32, 256, 1, 8)
    assert ts.reached(Time.parse("4ba")) and not ts.reached(Time.parse("2ep")) and ts.reached(Time.parse("256tok"))
    other = Timestamp()
    other.load_state_dict(ts.state_dict())
    assert other == ts
    with pytest.raises(ConfigError):
        other.load_state_dict({"bogus": 1})


def test_crossed_intervals():
    before, after = Timestamp(batch=9, sample=90), Timestamp(batch=10, sample=100)
    assert crossed(Time.parse("5ba"), before, after) and not crossed(Time.parse("3ba"), before, after)
    assert crossed(Time.parse("64sp"), Timestamp(sample=60), Timestamp(sample=68))
    assert not crossed(Time.parse("1ep"), before, after)
    assert crossed(Time.parse("1ep"), before, Timestamp(epoch=1), epoch_ended=True)
