"""ccv1d on torch tensors: CPU tensors always (when torch imports), CUDA tensors when
torch.cuda.is_available(). References are float64 torch.nn.functional.conv1d (outputs, and
gradients from torch autograd through it) and the float64 loops of _reference.py.

About gradcheck: the library has no float64 dtype, so torch.autograd.gradcheck cannot run on the
op itself (finite differences in f32 are too noisy to be a test). Instead, test_gradients_*
compare our analytic gradients (the custom op's backward = ccv1d_bwd) with the exact gradients of
a float64 F.conv1d reference computed by torch autograd, and opcheck verifies the registration.
"""
import os
import sys
import unittest

from _common import np

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # optional: loud skip, never a silent pass
    torch = None
    sys.stderr.write("\n*** SKIPPED test_torch: torch is not installed ***\n")

import ccv1d  # noqa: E402

if torch is not None and np is not None:
    import _reference as ref

DEVICES = ["cpu"] + (["cuda"] if torch is not None and torch.cuda.is_available() else [])
TOL = {} if torch is None else {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}


def rel_err(got, want):
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    if torch.isnan(got).any():
        return float("inf")
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


def make_x(B, D, L, dtype, device, channel_last, requires_grad=False):
    if channel_last:
        x = torch.randn(B, L, D, device=device, dtype=dtype).transpose(1, 2)
    else:
        x = torch.randn(B, D, L, device=device, dtype=dtype)
    return x.detach().requires_grad_(requires_grad)


def conv_ref(x, w, b, init, silu):
    """float64 F.conv1d: (out, final_states)."""
    D, W = w.shape
    L = x.shape[-1]
    xc = torch.cat([init, x], dim=-1) if init is not None else F.pad(x, (W - 1, 0))
    out = F.conv1d(xc, w.unsqueeze(1), b, groups=D)[..., :L]
    final = xc[..., xc.shape[-1] - (W - 1):] if W > 1 else xc[..., :0]
    return (F.silu(out) if silu else out), final


def f64_leaf(t):
    return None if t is None else t.detach().double().requires_grad_()


@unittest.skipIf(torch is None, "torch is not installed")
class TorchForwardBackward(unittest.TestCase):
    def case(self, device, B, D, L, W, dtype, channel_last, silu, with_bias=True, with_states=False):
        torch.manual_seed(B * 1000 + D * 10 + L + W)
        x = make_x(B, D, L, dtype, device, channel_last, True)
        w = (torch.randn(D, W, device=device) * 0.5).requires_grad_()
        b = torch.randn(D, device=device).requires_grad_() if with_bias else None
        init = make_x(B, D, W - 1, dtype, device, channel_last, True) if with_states else None
        dout = make_x(B, D, L, dtype, device, channel_last)
        act = "silu" if silu else None
        res = ccv1d.causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=with_states, activation=act)
        out, final = res if with_states else (res, None)
        self.assertEqual(out.shape, x.shape)
        self.assertEqual(out.dtype, dtype)
        self.assertEqual(out.device, x.device)
        dfinal = torch.randn_like(final) if with_states else None
        torch.autograd.backward([out] + ([final] if with_states else []), [dout] + ([dfinal] if with_states else []))

        xd, wd, bd, id_ = f64_leaf(x), f64_leaf(w), f64_leaf(b), f64_leaf(init)
        rout, rfinal = conv_ref(xd, wd, bd, id_, silu)
        loss = (rout * dout.double()).sum() + ((rfinal * dfinal.double()).sum() if with_states else 0)
        loss.backward()
        name = f"{device} {B}x{D}x{L} w{W} {dtype} {'cl' if channel_last else 'cf'} silu={silu} states={with_states}"
        tol = TOL[dtype]
        pairs = [("out", out, rout), ("dx", x.grad, xd.grad), ("dweight", w.grad, wd.grad)]
        if with_bias:
            pairs.append(("dbias", b.grad, bd.grad))
        if with_states:
            pairs += [("final", final, rfinal), ("dinitial", init.grad, id_.grad)]
        for what, got, want in pairs:
            self.assertIsNotNone(got, f"{name}: no {what}")
            e = rel_err(got, want)
            self.assertLessEqual(e, tol, f"{name}: {what} rel err {e:.2e} > {tol:.0e}")
        self.assertEqual(w.grad.dtype, w.dtype)

    def test_gradients_against_f64_conv1d(self):
        for device in DEVICES:
            for dtype in (torch.float32, torch.bfloat16, torch.float16):
                for channel_last in (False, True):
                    for silu in (False, True):
                        self.case(device, 2, 16, 37, 4, dtype, channel_last, silu)
            for W in (2, 3, 5, 8):
                self.case(device, 1, 8, 20, W, torch.float32, W % 2 == 0, True, with_bias=W != 3)

    def test_gradients_with_states(self):
        for device in DEVICES:
            for W, L in ((4, 30), (4, 2), (3, 1), (2, 9)):
                for channel_last in (False, True):
                    self.case(device, 3, 8, L, W, torch.float32, channel_last, True, with_states=True)
            self.case(device, 2, 16, 40, 4, torch.bfloat16, True, True, with_states=True)

    def test_final_states_out_and_no_grad_for_indices(self):
        for device in DEVICES:
            x = make_x(2, 4, 9, torch.float32, device, False, True)
            w = torch.randn(4, 4, device=device, requires_grad=True)
            buf = torch.full((2, 4, 3), float("nan"), device=device)
            seq = torch.tensor([[0] * 4 + [1] * 5, [2] * 9], dtype=torch.int32, device=device)
            out, final = ccv1d.causal_conv1d_fn(x, w, seq_idx=seq, return_final_states=True, final_states_out=buf)
            self.assertIs(final, buf)
            self.assertFalse(torch.isnan(buf).any())
            rfinal = x.detach()[..., -3:]
            self.assertEqual(rel_err(buf, rfinal), 0.0)
            out.sum().backward()
            self.assertIsNotNone(x.grad)

    def test_inference_without_grad(self):
        for device in DEVICES:
            x = make_x(2, 8, 10, torch.float32, device, True)
            w = torch.randn(8, 4, device=device)
            with torch.no_grad():
                out = ccv1d.causal_conv1d_fn(x, w, activation="silu")
            self.assertLessEqual(rel_err(out, conv_ref(x.double(), w.double(), None, None, True)[0]), 1e-5)

    def test_errors(self):
        x, w = torch.randn(2, 4, 8), torch.randn(4, 3)
        with self.assertRaises(ccv1d.Ccv1dError) as e:
            ccv1d.causal_conv1d_fn(x.double(), w.double())
        self.assertEqual(e.exception.status_name, "DTYPE")
        self.assertIn("x", e.exception.message)
        with self.assertRaises(ccv1d.Ccv1dError) as e:
            ccv1d.causal_conv1d_fn(x, w[:, :2].T)
        self.assertEqual(e.exception.status_name, "SHAPE")
        self.assertIn("weight", e.exception.message)
        if "cuda" in DEVICES:
            with self.assertRaises(ccv1d.Ccv1dError) as e:
                ccv1d.causal_conv1d_fn(x.cuda(), w)
            self.assertEqual(e.exception.status_name, "WRONG_DEVICE")
            self.assertIn("weight", e.exception.message)


@unittest.skipIf(torch is None or np is None, "torch or numpy is not installed")
class TorchUpdateVarlen(unittest.TestCase):
    def test_update(self):
        for device in DEVICES:
            for cache, idx in ((None, None), ([3, 0, 9], None), (None, [4, -1, 1]), ([1, 2, 5], [0, 3, -1])):
                torch.manual_seed(0)
                B, D, S, W, n = 3, 8, 2, 4, 5
                x = torch.randn(B, D, S, device=device)
                state = torch.randn(5, D, n, device=device)
                w, b = torch.randn(D, W, device=device), torch.randn(D, device=device)
                c = None if cache is None else torch.tensor(cache, dtype=torch.int32, device=device)
                i = None if idx is None else torch.tensor(idx, dtype=torch.int32, device=device)
                before = state.clone()
                out = ccv1d.causal_conv1d_update(x, state, w, b, "silu", c, i)
                want, want_state = ref.update(x.cpu().numpy(), before.cpu().numpy(), w.cpu().numpy(), b.cpu().numpy(),
                                              True, cache, idx)
                name = f"{device} cache={cache} idx={idx}"
                self.assertLessEqual(rel_err(out, torch.from_numpy(want)), 1e-5, name)
                self.assertLessEqual(rel_err(state, torch.from_numpy(want_state)), 1e-6, name + " state")
                out1 = ccv1d.causal_conv1d_update(x[:, :, 0], state, w, b, None, c, i)
                self.assertEqual(out1.shape, (B, D))

    def test_varlen(self):
        for device in DEVICES:
            torch.manual_seed(1)
            D, W = 8, 4
            cu = [0, 7, 7, 8, 20]
            T = cu[-1]
            x = torch.randn(T, D, device=device).T  # vLLM's (dim, tokens), channel-last memory
            w, b = torch.randn(D, W, device=device), torch.randn(D, device=device)
            pool = torch.randn(6, D, W - 1, device=device)
            slots, has = [5, -1, 0, 2], [True, True, False, True]
            t = lambda v, dt=torch.int32: torch.tensor(v, dtype=dt, device=device)  # noqa: E731
            before = pool.clone()
            out = ccv1d.causal_conv1d_varlen_fn(x, w, b, t(cu), pool, t(slots), t(has, torch.bool), "silu")
            want, want_pool = ref.varlen(x.cpu().numpy(), w.cpu().numpy(), b.cpu().numpy(), cu,
                                         before.cpu().numpy(), slots, has, True)
            self.assertEqual(out.shape, x.shape)
            self.assertLessEqual(rel_err(out, torch.from_numpy(want)), 1e-5, device)
            self.assertLessEqual(rel_err(pool, torch.from_numpy(want_pool)), 1e-6, device)
            # Functional form, differentiable.
            xg = x.detach().requires_grad_()
            wg = w.detach().requires_grad_()
            init = before.clone().requires_grad_()
            out, final = ccv1d.causal_conv1d_varlen_fn(xg, wg, b, t(cu), None, t(slots), t(has, torch.bool), "silu",
                                                       initial_states=init, return_final_states=True)
            dout, dfinal = torch.randn_like(out), torch.randn_like(final)
            torch.autograd.backward([out, final], [dout, dfinal])
            _, _, gx, gw, _, gi = ref.varlen(x.cpu().numpy(), w.cpu().numpy(), b.cpu().numpy(), cu,
                                             before.cpu().numpy(), slots, has, True, dout.cpu().numpy(),
                                             dfinal.cpu().numpy())
            for what, got, exp in (("dx", xg.grad, gx), ("dweight", wg.grad, gw), ("dinitial", init.grad, gi)):
                self.assertLessEqual(rel_err(got, torch.from_numpy(exp)), 1e-5, f"{device} varlen {what}")


def _have_custom_ops():
    if torch is None or not hasattr(torch.library, "opcheck"):
        return False
    from ccv1d import _torch_ops
    return _torch_ops.HAVE_CUSTOM_OP


@unittest.skipIf(not _have_custom_ops(), "torch.library.custom_op/opcheck unavailable (torch < 2.4 or fallback forced)")
class CustomOps(unittest.TestCase):
    def test_opcheck(self):
        for device in DEVICES:
            x = torch.randn(2, 6, 12, device=device).requires_grad_()
            w = torch.randn(6, 4, device=device).requires_grad_()
            b = torch.randn(6, device=device).requires_grad_()
            init = torch.randn(2, 6, 3, device=device).requires_grad_()
            torch.library.opcheck(torch.ops.ccv1d.fwd.default, (x, w, b, None, init, None, None, None, 0, True, True))
            dout = torch.randn(2, 6, 12, device=device)
            torch.library.opcheck(torch.ops.ccv1d.bwd.default,
                                  (x.detach(), w.detach(), b.detach(), None, init.detach(), None, None, None, 0, True,
                                   dout, None, True))
            state = torch.randn(2, 6, 3, device=device)
            torch.library.opcheck(torch.ops.ccv1d.update.default, (x.detach()[:, :, :1], state, w.detach(), None,
                                                                   False, None, None))

    def test_compile_fullgraph(self):
        """fullgraph=True fails on any graph break. CPU: aot_eager (no C++ codegen needed);
        CUDA: the default inductor backend."""
        for device in DEVICES:
            backend = "inductor" if device == "cuda" else "aot_eager"

            def step(x, w, b, state):
                y = ccv1d.causal_conv1d_fn(x * 2, w, b, activation="silu")
                z = ccv1d.causal_conv1d_update(y[:, :, -1].detach(), state, w.detach(), b.detach(), "silu")
                return y.sum() + z.sum()

            torch._dynamo.reset()
            compiled = torch.compile(step, fullgraph=True, backend=backend)
            x = torch.randn(2, 8, 16, device=device, requires_grad=True)
            w = torch.randn(8, 4, device=device, requires_grad=True)
            b = torch.randn(8, device=device, requires_grad=True)
            s1, s2 = torch.randn(2, 8, 3, device=device), None
            s2 = s1.clone()
            got = compiled(x, w, b, s1)
            got.backward()
            gx, gw = x.grad.clone(), w.grad.clone()
            x.grad = w.grad = b.grad = None
            want = step(x, w, b, s2)
            want.backward()
            self.assertLessEqual(abs(got.item() - want.item()), 1e-4 * (1 + abs(want.item())), device)
            self.assertLessEqual(rel_err(gx, x.grad), 1e-6, device)
            self.assertLessEqual(rel_err(gw, w.grad), 1e-6, device)
            self.assertTrue(torch.equal(s1, s2), f"{device}: conv_state mutated identically")

    def test_compile_dynamic_shapes(self):
        """dynamic=True: the fake kernels keep sizes symbolic (states too), no recompile per length."""
        for device in DEVICES:
            backend = "inductor" if device == "cuda" else "aot_eager"

            def step(x, w, init):
                y, f = ccv1d.causal_conv1d_fn(x, w, initial_states=init, return_final_states=True, activation="silu")
                return y.sum() + f.sum()

            torch._dynamo.reset()
            compiled = torch.compile(step, fullgraph=True, backend=backend, dynamic=True)
            for L in (16, 23, 40):
                x = torch.randn(2, 8, L, device=device, requires_grad=True)
                w = torch.randn(8, 4, device=device)
                init = torch.randn(2, 8, 3, device=device, requires_grad=True)
                got = compiled(x, w, init)
                got.backward()
                gx, gi = x.grad.clone(), init.grad.clone()
                x.grad = init.grad = None
                step(x, w, init).backward()
                self.assertLessEqual(rel_err(gx, x.grad), 1e-6, f"{device} L={L}")
                self.assertLessEqual(rel_err(gi, init.grad), 1e-6, f"{device} L={L}")


@unittest.skipIf(torch is None or not torch.cuda.is_available(), "no CUDA device")
class CudaStreams(unittest.TestCase):
    def test_side_stream_and_workspace(self):
        side = torch.cuda.Stream()
        x = make_x(2, 64, 300, torch.bfloat16, "cuda", True, True)
        w = torch.randn(64, 4, device="cuda", requires_grad=True)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = ccv1d.causal_conv1d_fn(x, w, activation="silu")
            out.float().square().sum().backward()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        xd, wd = f64_leaf(x), f64_leaf(w)
        rout, _ = conv_ref(xd, wd, None, None, True)
        rout.square().sum().backward()
        self.assertLessEqual(rel_err(out, rout), 1.5e-2)
        self.assertLessEqual(rel_err(w.grad, wd.grad), 2e-2)


if __name__ == "__main__":
    unittest.main()
