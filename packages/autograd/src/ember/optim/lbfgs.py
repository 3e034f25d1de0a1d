"""L-BFGS with an optional strong Wolfe line search, as `torch.optim.LBFGS` (minFunc's
algorithm): the same iteration, stopping tests and state, so trajectories match PyTorch's."""
from __future__ import annotations

import ember

from .optimizer import Optimizer

__all__ = ["LBFGS"]


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to bounds."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square.sqrt() if isinstance(d2_square, ember.Tensor) else d2_square ** 0.5
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


class _Bracket:
    """The line search's interval: step, loss, gradient and directional derivative at each end."""

    def __init__(self, ts, fs, gs, gtds):
        self.t, self.f, self.g, self.gtd = ts, fs, gs, gtds

    def set(self, i, t, f, g, gtd):
        self.t[i], self.f[i], self.g[i], self.gtd[i] = t, f, g, gtd

    def order(self):
        return (0, 1) if self.f[0] <= self.f[-1] else (1, 0)


def _bracket_phase(obj_func, x, t, d, f, g, gtd, c1, c2, max_ls):
    """Grow the step until an interval holds a point satisfying the strong Wolfe conditions.
    Returns (bracket, done, ls_iter, evals, t, f_new, g_new, gtd_new)."""
    f_new, g_new = obj_func(x, t, d)
    evals = 1
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            return _Bracket([t_prev, t], [f_prev, f_new], [g_prev, g_new.clone()],
                            [gtd_prev, gtd_new]), False, ls_iter, evals
        if abs(gtd_new) <= -c2 * gtd:
            return _Bracket([t], [f_new], [g_new], [gtd_new]), True, ls_iter, evals
        if gtd_new >= 0:
            return _Bracket([t_prev, t], [f_prev, f_new], [g_prev, g_new.clone()],
                            [gtd_prev, gtd_new]), False, ls_iter, evals
        min_step, max_step = t + 0.01 * (t - t_prev), t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.clone(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    # out of evaluations: PyTorch keeps [0, t] without directional derivatives
    return _Bracket([0, t], [f, f_new], [g, g_new], [None, None]), False, ls_iter, evals


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """Strong Wolfe line search along d from x: (loss, flat grad, step, evaluations)."""
    d_norm = d.abs().max()
    g = g.clone()
    br, done, ls_iter, evals = _bracket_phase(obj_func, x, t, d, f, g, gtd, c1, c2, max_ls)
    insuf_progress = False
    low, high = br.order()
    while not done and ls_iter < max_ls:       # zoom: shrink the bracket by cubic steps
        if abs(br.t[1] - br.t[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(br.t[0], br.f[0], br.gtd[0], br.t[1], br.f[1], br.gtd[1])
        hi_t, lo_t = max(br.t), min(br.t)
        eps = 0.1 * (hi_t - lo_t)
        if min(hi_t - t, t - lo_t) < eps:
            if insuf_progress or t >= hi_t or t <= lo_t:
                t = hi_t - eps if abs(t - hi_t) < abs(t - lo_t) else lo_t + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= br.f[low]:
            br.set(high, t, f_new, g_new.clone(), gtd_new)
            low, high = (0, 1) if br.f[0] <= br.f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (br.t[high] - br.t[low]) >= 0:
                br.set(high, br.t[low], br.f[low], br.g[low], br.gtd[low])
            br.set(low, t, f_new, g_new.clone(), gtd_new)
    return br.f[low], br.g[low], br.t[low], evals


class LBFGS(Optimizer):
    """L-BFGS, as `torch.optim.LBFGS`: one parameter group; `step(closure)` re-evaluates the
    loss (closure clears grads, computes the loss, calls backward and returns it).

    >>> import ember
    >>> w = ember.zeros(2, requires_grad=True)
    >>> opt = ember.optim.LBFGS([w], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad(); loss = (w - ember.tensor([1.0, 2.0])).square().sum()
    ...     loss.backward(); return loss
    >>> _ = opt.step(closure)
    >>> [round(v, 4) for v in w.tolist()]
    [1.0, 2.0]
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._numel_cache = None

    def _numel(self) -> int:
        if self._numel_cache is None:
            self._numel_cache = sum(2 * p.numel() if p.is_complex() else p.numel()
                                    for p in self._params)
        return self._numel_cache

    def _gather_flat_grad(self):
        views = []
        for p in self._params:
            if p.grad is None:
                view = ember.zeros(p.numel(), dtype=p.dtype, device=p.device)
            else:
                view = p.grad.reshape(-1)
            if view.is_complex():
                view = ember.view_as_real(view).reshape(-1)
            views.append(view)
        return ember.cat(views, 0)

    def _add_grad(self, step_size, update) -> None:
        offset = 0
        for p in self._params:
            if p.is_complex():
                p = ember.view_as_real(p)
            numel = p.numel()
            p.add_(update[offset:offset + numel].view_as(p), alpha=step_size)
            offset += numel
        assert offset == self._numel()

    def _clone_param(self):
        return [p.clone() for p in self._params]

    def _set_param(self, params_data) -> None:
        for p, pdata in zip(self._params, params_data):
            p.copy_(pdata)

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        with ember.enable_grad():
            loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    @staticmethod
    def _direction(state, flat_grad, prev_flat_grad, d, t, history_size):
        """The two-loop recursion: -H g from the stored (y, s) pairs, after adding the newest."""
        old_dirs, old_stps, ro = state["old_dirs"], state["old_stps"], state["ro"]
        y = flat_grad.sub(prev_flat_grad)
        s = d.mul(t)
        ys = y.dot(s)
        if ys > 1e-10:
            if len(old_dirs) == history_size:
                old_dirs.pop(0)
                old_stps.pop(0)
                ro.pop(0)
            old_dirs.append(y)
            old_stps.append(s)
            ro.append(1.0 / ys)
            state["H_diag"] = ys / y.dot(y)
        if "al" not in state:
            state["al"] = [None] * history_size
        al = state["al"]
        q = flat_grad.neg()
        for i in range(len(old_dirs) - 1, -1, -1):
            al[i] = old_stps[i].dot(q) * ro[i]
            q.add_(old_dirs[i] * -al[i])
        d = r = ember.mul(q, state["H_diag"])
        for i in range(len(old_dirs)):
            be_i = old_dirs[i].dot(r) * ro[i]
            r.add_(old_stps[i] * (al[i] - be_i))
        return d

    @ember.no_grad()
    def step(self, closure):
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with ember.enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if flat_grad.abs().max() <= tolerance_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                state.update(old_dirs=[], old_stps=[], ro=[], H_diag=1)
            else:
                d = self._direction(state, flat_grad, prev_flat_grad, d, t, history_size)
            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss
            t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:
                break
            ls_func_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = self._clone_param()

                def obj_func(x, t, d):
                    return self._directional_evaluate(closure, x, t, d)
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd,
                    max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = flat_grad.abs().max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    with ember.enable_grad():
                        loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = flat_grad.abs().max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if d.mul(t).abs().max() <= tolerance_change or abs(loss - prev_loss) < \
                    tolerance_change:
                break
        state.update(d=d, t=t, prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
