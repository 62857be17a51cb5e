"""ccv1d on numpy arrays (CPU backend) against the float64 reference in _reference.py."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from _common import PYTHON_DIR, np, require

if np is None:
    require(False, "numpy")

import _reference as ref  # noqa: E402

import ccv1d  # noqa: E402

TOL = {np.float32: 2e-5, np.float16: 3e-3}


def close(test, got, want, dtype, what):
    """|got - want| <= tol * (1 + |want|) elementwise (NaN in got fails)."""
    got = np.asarray(got, dtype=np.float64)
    tol = TOL[dtype] * max(1.0, float(np.abs(want).max(initial=0.0)))
    err = np.abs(got - want)
    test.assertFalse(np.isnan(got).any(), f"{what}: NaN in output (unwritten?)")
    test.assertTrue((err <= tol).all(), f"{what}: max |err| {err.max(initial=0):.3e} > tol {tol:.1e}")


def rnd(rng, shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def make_x(rng, B, D, L, dtype, layout):
    """x [B, D, L] as channel-first ('cf'), channel-last ('cl': a transposed [B, L, D] array) or
    strided ('st': every other channel of a [B, 2D, L] array)."""
    if layout == "cf":
        return rnd(rng, (B, D, L), dtype)
    if layout == "cl":
        return rnd(rng, (B, L, D), dtype).transpose(0, 2, 1)
    return rnd(rng, (B, 2 * D, L), dtype)[:, ::2, :]


def as_stored(a):
    """What the library sees: values rounded to the array's dtype, as float64."""
    return None if a is None else np.asarray(a).astype(np.float64)


class Forward(unittest.TestCase):
    def test_widths_layouts_bias_activation(self):
        rng = np.random.default_rng(0)
        n = 0
        for W in (1, 2, 3, 4, 5, 8):
            for layout in ("cf", "cl", "st"):
                for dtype in (np.float32, np.float16):
                    for silu, with_bias in ((False, True), (True, False), (True, True)):
                        B, D, L = 2, 6, 19
                        x = make_x(rng, B, D, L, dtype, layout)
                        w = rnd(rng, (D, W), np.float32, 0.5)
                        b = rnd(rng, (D,), np.float32) if with_bias else None
                        out = ccv1d.causal_conv1d_fn(x, w, b, activation="silu" if silu else None)
                        self.assertEqual(out.shape, x.shape)
                        self.assertEqual(out.dtype, x.dtype)
                        if layout == "cl":
                            self.assertEqual(out.strides[1], out.itemsize, "channel-last x gives channel-last out")
                        want, _ = ref.fwd(as_stored(x), w, b, silu=silu)
                        close(self, out, want, dtype, f"W={W} {layout} {dtype.__name__} silu={silu} bias={with_bias}")
                        n += 1
        self.assertEqual(n, 108)

    def test_f16_weight_and_swish(self):
        rng = np.random.default_rng(1)
        x = rnd(rng, (1, 4, 9), np.float32)
        w = rnd(rng, (4, 3), np.float16)
        b = rnd(rng, (4,), np.float16)
        out = ccv1d.causal_conv1d_fn(x, w, b, activation="swish")
        close(self, out, ref.fwd(x, as_stored(w), as_stored(b), silu=True)[0], np.float32, "f16 weight")

    def test_seq_idx_with_padding(self):
        rng = np.random.default_rng(2)
        B, D, L, W = 2, 5, 17, 4
        for layout in ("cf", "cl"):
            x = make_x(rng, B, D, L, np.float32, layout)
            w, b = rnd(rng, (D, W)), rnd(rng, (D,))
            seq_idx = np.array([[0] * 5 + [1] * 7 + [2] * 3 + [-1] * 2,
                                [-1] * 3 + [4] * 2 + [5] * 12], dtype=np.int32)
            out = ccv1d.causal_conv1d_fn(x, w, b, seq_idx=seq_idx, activation="silu")
            want, _ = ref.fwd(x, w, b, seq_idx=seq_idx, silu=True)
            close(self, out, want, np.float32, f"seq_idx {layout}")
            self.assertTrue((out[0, :, -2:] == 0).all() and (out[1, :, :3] == 0).all(), "padding gives 0")

    def test_initial_and_final_states(self):
        rng = np.random.default_rng(3)
        for W in (2, 3, 4, 6):
            for L in (1, 2, W - 1, 13):
                for layout in ("cf", "cl"):
                    B, D = 3, 4
                    x = make_x(rng, B, D, L, np.float32, layout)
                    w, b = rnd(rng, (D, W)), rnd(rng, (D,))
                    init = rnd(rng, (B, D, W - 1))
                    out, final = ccv1d.causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True,
                                                        activation="silu")
                    want, want_final = ref.fwd(x, w, b, init=init, silu=True)
                    name = f"W={W} L={L} {layout}"
                    close(self, out, want, np.float32, name)
                    close(self, final, want_final, np.float32, name + " final")
                    self.assertEqual(final.shape, (B, D, W - 1))
                    # final_states_out: written in place (poisoned first) and returned.
                    buf = np.full((B, D, W - 1), np.nan, np.float32)
                    out2, final2 = ccv1d.causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True,
                                                          final_states_out=buf, activation="silu")
                    self.assertIs(final2, buf)
                    close(self, buf, want_final, np.float32, name + " final_states_out")

    def test_seq_idx_with_states(self):
        rng = np.random.default_rng(4)
        B, D, L, W = 2, 3, 9, 4
        x, w = rnd(rng, (B, D, L)), rnd(rng, (D, W))
        init = rnd(rng, (B, D, W - 1))
        seq_idx = np.array([[3, 3, 3, 7, 7, 7, 7, 7, 7], [1, 1, 1, 1, 1, 1, 2, 2, -1]], dtype=np.int32)
        out, final = ccv1d.causal_conv1d_fn(x, w, None, seq_idx, init, True)
        want, want_final = ref.fwd(x, w, None, seq_idx, init)
        close(self, out, want, np.float32, "out")
        close(self, final, want_final, np.float32, "final")


class Backward(unittest.TestCase):
    def test_against_the_adjoint(self):
        rng = np.random.default_rng(5)
        for W in (2, 4, 5):
            for layout in ("cf", "cl"):
                for with_states, with_seq in ((False, False), (True, False), (True, True)):
                    B, D, L = 2, 5, 15
                    x = make_x(rng, B, D, L, np.float32, layout)
                    w, b = rnd(rng, (D, W)), rnd(rng, (D,))
                    dout = make_x(rng, B, D, L, np.float32, layout)
                    init = rnd(rng, (B, D, W - 1)) if with_states else None
                    dfinal = rnd(rng, (B, D, W - 1)) if with_states else None
                    seq = (np.arange(L)[None, :] // 6 + np.array([[0], [-1]])).astype(np.int32) if with_seq else None
                    dx_buf = np.full(x.shape, np.nan, np.float32)
                    dx, dw, db, dinit = ccv1d.causal_conv1d_bwd(
                        x, w, b, dout, seq_idx=seq, initial_states=init, dfinal_states=dfinal, dx=dx_buf,
                        return_dinitial_states=with_states, activation="silu")
                    self.assertIs(dx, dx_buf)
                    want = ref.bwd(x, w, b, dout, seq, init, dfinal, silu=True)
                    name = f"W={W} {layout} states={with_states} seq={with_seq}"
                    for got, exp, what in zip((dx, dw, db), want, ("dx", "dweight", "dbias")):
                        close(self, got, exp, np.float32, f"{name} {what}")
                    if with_states:
                        close(self, dinit, want[3], np.float32, f"{name} dinitial_states")
                    else:
                        self.assertIsNone(dinit)

    def test_no_bias_gives_no_dbias(self):
        rng = np.random.default_rng(6)
        x, w, dout = rnd(rng, (1, 3, 7)), rnd(rng, (3, 4)), rnd(rng, (1, 3, 7))
        dx, dw, db, _ = ccv1d.causal_conv1d_bwd(x, w, None, dout)
        self.assertIsNone(db)
        want = ref.bwd(x, w, None, dout)
        close(self, dx, want[0], np.float32, "dx")
        close(self, dw, want[1], np.float32, "dweight")


class Update(unittest.TestCase):
    def check(self, rng, B, D, S, W, state_len, slots, silu, cache=None, idx=None, squeeze=False):
        x = rnd(rng, (B, D) if squeeze else (B, D, S))
        state = rnd(rng, (slots, D, state_len))
        w, b = rnd(rng, (D, W)), rnd(rng, (D,))
        before = state.copy()
        out = ccv1d.causal_conv1d_update(x, state, w, b, "silu" if silu else None, cache, idx)
        self.assertEqual(out.shape, x.shape)
        want, want_state = ref.update(x[:, :, None] if squeeze else x, before, w, b, silu, cache, idx)
        name = f"B={B} S={S} W={W} n={state_len} cache={cache is not None} idx={idx is not None}"
        close(self, out, want[:, :, 0] if squeeze else want, np.float32, name)
        close(self, state, want_state, np.float32, name + " conv_state")
        return before, state

    def test_plain(self):
        rng = np.random.default_rng(7)
        for W in (2, 3, 4):
            for S in (1, 3):
                for state_len in (W - 1, W + 2):
                    self.check(rng, 3, 4, S, W, state_len, 3, silu=S == 1)
        self.check(rng, 2, 5, 1, 4, 3, 2, silu=True, squeeze=True)

    def test_cache_seqlens_circular(self):
        rng = np.random.default_rng(8)
        for S in (1, 2, 5):
            cache = np.array([0, 3, 7, 12], dtype=np.int32)
            self.check(rng, 4, 3, S, 4, 5, 4, silu=True, cache=cache)

    def test_conv_state_indices_with_padding_rows(self):
        rng = np.random.default_rng(9)
        idx = np.array([4, -1, 0, 2], dtype=np.int32)
        before, after = self.check(rng, 4, 3, 2, 4, 3, 6, silu=False, idx=idx)
        for untouched in (1, 3, 5):
            np.testing.assert_array_equal(after[untouched], before[untouched])
        x = rnd(rng, (4, 3, 2))
        out = ccv1d.causal_conv1d_update(x, after, rnd(rng, (3, 4)), None, None, None, idx)
        self.assertTrue((out[1] == 0).all(), "padding row gives 0")
        cache = np.array([1, 0, 5, 2], dtype=np.int32)
        self.check(rng, 4, 3, 3, 3, 4, 5, silu=True, cache=cache, idx=idx)


class Varlen(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(10)
        self.rng = rng
        self.D, self.W = 4, 4
        self.cu = np.array([0, 5, 5, 6, 14, 20], dtype=np.int32)  # includes an empty and a 1-token sequence
        self.T = int(self.cu[-1])
        self.w, self.b = rnd(rng, (self.D, self.W)), rnd(rng, (self.D,))

    def test_conv_states_in_place(self):
        for layout in ("cf", "cl"):
            x = rnd(self.rng, (self.D, self.T)) if layout == "cf" else rnd(self.rng, (self.T, self.D)).T
            pool = rnd(self.rng, (7, self.D, self.W - 1))
            slots = np.array([3, -1, 0, 6, 2], dtype=np.int32)
            has = np.array([True, True, False, True, False])
            before = pool.copy()
            out = ccv1d.causal_conv1d_varlen_fn(x, self.w, self.b, self.cu, pool, slots, has, "silu")
            self.assertEqual(out.shape, x.shape)
            want, want_pool = ref.varlen(x, self.w, self.b, self.cu, before, slots, has, True)
            close(self, out, want, np.float32, f"varlen out {layout}")
            close(self, pool, want_pool, np.float32, f"varlen pool {layout}")
            np.testing.assert_array_equal(pool[[1, 4, 5]], before[[1, 4, 5]])  # unused slots untouched

    def test_pad_slot_id_and_default_slots(self):
        x = rnd(self.rng, (1, self.D, self.T))
        pool = rnd(self.rng, (5, self.D, self.W - 1))
        slots = np.array([2, 9, 0, 1, 9], dtype=np.int32)  # 9 = the caller's pad id
        before = pool.copy()
        out = ccv1d.causal_conv1d_varlen_fn(x, self.w, None, self.cu, pool, slots, None, None, pad_slot_id=9)
        want, want_pool = ref.varlen(x[0], self.w, None, self.cu, before, [2, -1, 0, 1, -1], [True] * 5, False)
        close(self, out[0], want, np.float32, "pad_slot_id out")
        close(self, pool, want_pool, np.float32, "pad_slot_id pool")
        # Without state_indices sequence i uses slot i.
        pool = rnd(self.rng, (5, self.D, self.W - 1))
        before = pool.copy()
        out = ccv1d.causal_conv1d_varlen_fn(x, self.w, self.b, self.cu, pool)
        want, want_pool = ref.varlen(x[0], self.w, self.b, self.cu, before, list(range(5)), [True] * 5, False)
        close(self, out[0], want, np.float32, "default slots")
        close(self, pool, want_pool, np.float32, "default slots pool")

    def test_functional_form_and_backward(self):
        x = rnd(self.rng, (self.D, self.T))
        init = rnd(self.rng, (6, self.D, self.W - 1))
        slots = np.array([5, 0, -1, 3, 1], dtype=np.int32)
        has = np.array([1, 0, 1, 1, 0], dtype=np.int32)
        init_before = init.copy()
        out, final = ccv1d.causal_conv1d_varlen_fn(x, self.w, self.b, self.cu, None, slots, has, "silu",
                                                    initial_states=init, return_final_states=True)
        np.testing.assert_array_equal(init, init_before)
        want, want_pool = ref.varlen(x, self.w, self.b, self.cu, init, slots, has, True)
        close(self, out, want, np.float32, "functional out")
        written = [5, 0, 3, 1]
        close(self, final[written], want_pool[written], np.float32, "functional final (written slots)")
        self.assertTrue((final[[2, 4]] == 0).all(), "slots no sequence wrote are zero")
        dout, dfinal = rnd(self.rng, (self.D, self.T)), rnd(self.rng, (6, self.D, self.W - 1))
        dx, dw, db, dinit = ccv1d.causal_conv1d_bwd(
            x[None], self.w, self.b, dout[None], initial_states=init, dfinal_states=dfinal,
            return_dinitial_states=True, activation="silu", cu_seqlens=self.cu, state_indices=slots,
            has_initial_state=has, num_state_slots=6)
        _, _, gx, gw, gb, gi = ref.varlen(x, self.w, self.b, self.cu, init, slots, has, True, dout, dfinal)
        close(self, dx[0], gx, np.float32, "varlen dx")
        close(self, dw, gw, np.float32, "varlen dweight")
        close(self, db, gb, np.float32, "varlen dbias")
        close(self, dinit, gi, np.float32, "varlen dinitial_states")


class Errors(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(11)
        self.x, self.w, self.b = rnd(rng, (2, 4, 8)), rnd(rng, (4, 3)), rnd(rng, (4,))

    def raises(self, status, field, f, *a, **k):
        with self.assertRaises(ccv1d.Ccv1dError) as e:
            f(*a, **k)
        self.assertEqual(e.exception.status_name, status, str(e.exception))
        self.assertEqual(e.exception.status, ccv1d.STATUS[status])
        self.assertIn(field, e.exception.message)
        return e.exception

    def test_dtypes(self):
        fn = ccv1d.causal_conv1d_fn
        e = self.raises("DTYPE", "x", fn, self.x.astype(np.float64), self.w)
        self.assertIn("float64", str(e))
        self.raises("DTYPE", "weight", fn, self.x, self.w.astype(np.float64))
        self.raises("DTYPE", "seq_idx", fn, self.x, self.w, seq_idx=np.zeros((2, 8), np.int64))
        self.raises("DTYPE", "initial_states", fn, self.x, self.w,
                    initial_states=np.zeros((2, 4, 2), np.float16))
        self.raises("DTYPE", "conv_state", ccv1d.causal_conv1d_update, self.x[:, :, 0], np.zeros((2, 4, 2), np.float16),
                    self.w)

    def test_shapes(self):
        fn = ccv1d.causal_conv1d_fn
        self.raises("SHAPE", "weight", fn, self.x, self.w[:3])
        self.raises("SHAPE", "bias", fn, self.x, self.w, self.b[:2])
        self.raises("SHAPE", "initial_states", fn, self.x, self.w, initial_states=np.zeros((2, 4, 3), np.float32))
        self.raises("SHAPE", "seq_idx", fn, self.x, self.w, seq_idx=np.zeros((2, 7), np.int32))
        self.raises("SHAPE", "x", fn, self.x[0], self.w)
        self.raises("SHAPE", "conv_state", ccv1d.causal_conv1d_update, self.x[:, :, 0], np.zeros((2, 5, 2), np.float32),
                    self.w)
        self.raises("WIDTH", "width", fn, self.x, np.zeros((4, 9), np.float32))
        self.raises("SHAPE", "stride", fn, self.x[:, :, ::-1], self.w)

    def test_activation(self):
        with self.assertRaises(NotImplementedError) as e:
            ccv1d.causal_conv1d_fn(self.x, self.w, activation="relu")
        self.assertIsInstance(e.exception, ccv1d.Ccv1dError)
        self.assertIn("relu", str(e.exception))

    def test_bad_index_contents_touch_no_output(self):
        x = self.x[:1]
        pool = np.full((3, 4, 2), 7.0, np.float32)
        cu_bad = np.array([0, 3, 9], dtype=np.int32)  # does not end at seqlen 8
        self.raises("CU_SEQLENS", "cu_seqlens", ccv1d.causal_conv1d_varlen_fn, x, self.w, None, cu_bad, pool)
        cu = np.array([0, 3, 8], dtype=np.int32)
        self.raises("INDEX", "state_indices", ccv1d.causal_conv1d_varlen_fn, x, self.w, None, cu, pool,
                    np.array([0, 3], np.int32))
        self.assertTrue((pool == 7.0).all(), "pool untouched after a failed call")
        state = np.full((2, 4, 2), 5.0, np.float32)
        self.raises("INDEX", "conv_state_indices", ccv1d.causal_conv1d_update, self.x[:, :, :1], state, self.w,
                    conv_state_indices=np.array([0, 2], np.int32))
        self.assertTrue((state == 5.0).all(), "conv_state untouched after a failed call")
        buf = np.full((2, 4, 2), np.nan, np.float32)
        self.raises("DTYPE", "initial_states", ccv1d.causal_conv1d_fn, self.x, self.w,
                    initial_states=np.zeros((2, 4, 2), np.float16), return_final_states=True, final_states_out=buf)
        self.assertTrue(np.isnan(buf).all(), "final_states_out untouched after a failed call")

    def test_overlap_is_rejected(self):
        x = self.x.copy()
        self.raises("OVERLAP", "final_states", ccv1d.causal_conv1d_fn, x, self.w, return_final_states=True,
                    final_states_out=x[:, :, :2])


class Loading(unittest.TestCase):
    def run_py(self, code, env_lib, cwd):
        env = dict(os.environ, PYTHONPATH=cwd)
        env.pop("CAUSAL_CONV1D_LIB", None)
        if env_lib is not None:
            env["CAUSAL_CONV1D_LIB"] = env_lib
        return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True)

    def test_search_order_and_message(self):
        so = os.environ.get("CAUSAL_CONV1D_LIB")
        require(so and os.path.exists(so), "a built libcausal_conv1d.so (CAUSAL_CONV1D_LIB)")
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(os.path.join(PYTHON_DIR, "ccv1d"), os.path.join(tmp, "ccv1d"),
                            ignore=shutil.ignore_patterns("libcausal_conv1d.so*", "__pycache__"))
            probe = "import ccv1d; print(ccv1d.version())"
            # A wrong explicit path is an error that names it, never a silent fallback.
            r = self.run_py(probe, os.path.join(tmp, "nope.so"), tmp)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("LibraryNotFoundError", r.stderr)
            self.assertIn("nope.so", r.stderr)
            # Nothing set, nothing next to the package: the message lists where it looked.
            env_ld = os.environ.get("LD_LIBRARY_PATH", "")
            r = self.run_py(probe, None, tmp)
            if r.returncode != 0:
                self.assertIn("next to the package", r.stderr)
                self.assertIn("libcausal_conv1d.so.0", r.stderr)
            else:  # installed system-wide: fine, but say so
                sys.stderr.write(f"\n(note: a system libcausal_conv1d was found; LD_LIBRARY_PATH={env_ld!r})\n")
            # Next to the package: found without the variable.
            shutil.copy(so, os.path.join(tmp, "ccv1d", "libcausal_conv1d.so"))
            r = self.run_py("import ccv1d, ccv1d._lib as L; print(ccv1d.version(), L.lib()._name)", None, tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(os.path.join(tmp, "ccv1d", "libcausal_conv1d.so"), r.stdout)

    def test_import_needs_neither_numpy_nor_torch(self):
        code = ("import sys\n"
                "class Block:\n"
                "    def find_spec(self, name, path=None, target=None):\n"
                "        if name.split('.')[0] in ('numpy', 'torch'): raise ImportError('blocked ' + name)\n"
                "sys.meta_path.insert(0, Block())\n"
                "import ccv1d, ccv1d._lib as L\n"
                "p = L.new_params(L.ccv1d_fwd_params)\n"
                "try:\n    L.call('ccv1d_fwd', p)\n"
                "except ccv1d.Ccv1dError as e: print(e.status_name)\n")
        r = self.run_py(code, os.environ.get("CAUSAL_CONV1D_LIB"), PYTHON_DIR)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "WIDTH")


if __name__ == "__main__":
    unittest.main()
