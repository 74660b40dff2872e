# scipy: optimisation, statistics, sparse matrices, interpolation, integration, signal.
import numpy as np
from scipy import integrate, interpolate, optimize, signal, sparse, stats
from scipy.sparse.linalg import spsolve

res = optimize.minimize(lambda p: (p[0] - 3) ** 2 + (p[1] + 1) ** 2 + 2, x0=[0, 0], method="BFGS")
assert res.success and np.allclose(res.x, [3, -1], atol=1e-4)
root = optimize.brentq(lambda x: x ** 3 - 2 * x - 5, 2, 3)
assert abs(root - 2.0945514815) < 1e-8
xdata = np.linspace(0, 4, 50)
ydata = 2.5 * np.exp(-1.3 * xdata) + 0.5
popt, _ = optimize.curve_fit(lambda x, a, b, c: a * np.exp(-b * x) + c, xdata, ydata, p0=[1, 1, 1])
assert np.allclose(popt, [2.5, 1.3, 0.5], atol=1e-6)

rng = np.random.default_rng(1)
a, b = rng.normal(0, 1, 200), rng.normal(0.5, 1, 200)
t = stats.ttest_ind(a, b)
assert t.pvalue < 0.01
assert abs(stats.norm.cdf(1.96) - 0.975) < 1e-3
lr = stats.linregress(xdata, 3 * xdata + 1)
assert np.isclose(lr.slope, 3) and np.isclose(lr.intercept, 1)
assert stats.spearmanr([1, 2, 3, 4], [10, 20, 30, 40]).statistic == 1.0

n = 2000
lap = sparse.diags([-1, 2, -1], [-1, 0, 1], shape=(n, n), format="csr")
rhs = np.ones(n)
sol = spsolve(lap.tocsc(), rhs)
assert np.allclose(lap @ sol, rhs)
assert lap.nnz == 3 * n - 2

f = interpolate.interp1d([0, 1, 2], [0, 10, 20])
assert float(f(1.5)) == 15.0
spline = interpolate.CubicSpline(xdata, np.sin(xdata))
assert abs(spline(1.0) - np.sin(1.0)) < 1e-4
val, err = integrate.quad(lambda x: np.exp(-x ** 2), -np.inf, np.inf)
assert abs(val - np.sqrt(np.pi)) < 1e-8
sol = integrate.solve_ivp(lambda t, y: -0.5 * y, (0, 10), [2.0], rtol=1e-8)
assert abs(sol.y[0, -1] - 2 * np.exp(-5)) < 1e-5
bb, aa = signal.butter(4, 0.1)
filtered = signal.filtfilt(bb, aa, np.sin(np.linspace(0, 10, 500)) + rng.normal(0, 0.1, 500))
assert filtered.shape == (500,)
peaks, _ = signal.find_peaks(np.sin(np.linspace(0, 6 * np.pi, 600)))
assert len(peaks) == 3
print("OK scipy_basics")
