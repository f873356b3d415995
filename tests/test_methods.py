"""The method registry: a name -> definition table with typed, validated fields."""

import pytest

from oscarkv.errors import InputError
from oscarkv.methods import METHOD_NAMES, METHODS, KVMethod, make_method


def test_misspelt_fields_are_refused():
    with pytest.raises(InputError, match="rotation='hadamrd' is not one of"):
        KVMethod("x", rotation="hadamrd")
    for kw in (dict(bits=3), dict(key_axis="chanel"), dict(clip="fit"), dict(levels="lloyd"),
               dict(center="yes"), dict(scale_dtype="fp16"), dict(sink=-1), dict(page=0), dict(group_size=True)):
        with pytest.raises(InputError):
            KVMethod("x", **kw)
    with pytest.raises(InputError, match="unknown method 'oscr'"):
        make_method("oscr")


def test_registry_and_shared_settings():
    assert METHOD_NAMES == tuple(METHODS)
    m = make_method("oscar", sink=4, recent=8, group_size=32, page=1, levels="lloyd-max")
    assert (m.rotation, m.clip, m.levels, m.sink, m.recent, m.group_size, m.page) == \
        ("calibrated", "fitted", "lloyd-max", 4, 8, 32, 1)
    # settings a method does not take are ignored, as before: kivi never clips, only oscar takes levels
    assert make_method("kivi", clip="default").clip == "off" and make_method("kivi").per_channel_keys
    assert make_method("hadamard", levels="lloyd-max").levels == "uniform"
    assert make_method("hadamard", clip="default").clip == "default"
    assert make_method("oscar+center").center == "on" and make_method("oscar+center").name == "oscar+center"
    with pytest.raises(InputError, match="does not support centering"):
        make_method("bf16", center="on")


def test_at_bits_spends_kivi_bits_on_the_largest_window():
    from oscarkv.errors import InputError
    from oscarkv.methods import METHODS

    for ctx, d in ((4096, 64), (2048, 128), (1000, 128)):
        kivi = METHODS["kivi"].with_windows(0, 0, 1)
        target = kivi.bits_per_element(ctx, d)
        m = METHODS["oscar-plus"].at_bits(target, ctx, d)
        assert m.bits_per_element(ctx, d) <= target and m.page == 1 and m.sink == min(4, m.sink + m.recent)
        bigger = m.with_windows(m.sink, m.recent + 1)
        assert bigger.bits_per_element(ctx, d) > target  # the largest such window
        assert m.name.startswith("oscar-plus@")
    with pytest.raises(InputError, match="without any window"):
        METHODS["oscar-plus"].at_bits(2.0, 4096, 64)


def test_log8_suffix():
    """"+log8": the method with one-byte scale / zero (scale_dtype="log8") under its own label, so one evaluation
    sets it beside the fp16 form; refused where scales are not per token (KIVI's keys) or there are none."""
    m = make_method("oscar+log8", sink=4, recent=8)
    assert (m.name, m.scale_dtype, m.sink) == ("oscar+log8", "log8", 4)
    assert make_method("oscar-plus+log8+q8").query == "int8"
    assert m.bits_per_element(4096, 64) < make_method("oscar").bits_per_element(4096, 64)
    for name in ("kivi+log8", "bf16+log8"):
        with pytest.raises(InputError, match=r"\+log8 .* applies to token-wise quantized methods"):
            make_method(name)
