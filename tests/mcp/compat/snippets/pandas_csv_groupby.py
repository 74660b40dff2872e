# pandas: CSV in and out, groupby/agg, merge, pivot_table, dates and resampling,
# rolling windows, string methods, JSON.
import io
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

work = Path(tempfile.mkdtemp(prefix="compat_pandas_", dir=os.getcwd()))
rng = np.random.default_rng(0)
n = 5000
df = pd.DataFrame({
    "date": pd.date_range("2024-01-01", periods=n, freq="h"),
    "store": rng.choice(["north", "south", "east", "west"], n),
    "product": rng.choice(["apple", "pear", "plum"], n),
    "units": rng.integers(1, 20, n),
    "price": rng.uniform(0.5, 3.0, n).round(2),
})
df["revenue"] = df.units * df.price
df.to_csv(work / "sales.csv", index=False)
back = pd.read_csv(work / "sales.csv", parse_dates=["date"])
pd.testing.assert_frame_equal(back, df, check_dtype=False)
assert back.date.dtype.kind == "M"

by_store = df.groupby("store").agg(units=("units", "sum"), revenue=("revenue", "sum"),
                                   orders=("units", "size")).sort_index()
assert by_store.orders.sum() == n and list(by_store.index) == ["east", "north", "south", "west"]
assert np.isclose(by_store.revenue.sum(), df.revenue.sum())
pivot = df.pivot_table(index="store", columns="product", values="units", aggfunc="sum", fill_value=0)
assert pivot.values.sum() == df.units.sum() and pivot.shape == (4, 3)
stores = pd.DataFrame({"store": ["north", "south", "east", "west"], "manager": list("ABCD")})
merged = df.merge(stores, on="store", how="left", validate="many_to_one")
assert merged.manager.notna().all() and len(merged) == n
daily = df.set_index("date").resample("D").revenue.sum()
assert len(daily) == int(np.ceil(n / 24)) and np.isclose(daily.sum(), df.revenue.sum())
rolling = daily.rolling(7, min_periods=1).mean()
assert rolling.notna().all()
top = df.groupby(["store", "product"]).revenue.sum().groupby(level=0).nlargest(1)
assert len(top) == 4
df["label"] = df.store.str.upper() + "-" + df["product"].str[:2]
assert df.label.str.contains("NORTH-ap").any()
df["month"] = df.date.dt.to_period("M").astype(str)
assert sorted(df.month.unique())[0] == "2024-01"
cum = df.sort_values("date").groupby("store").units.cumsum()
assert cum.max() <= df.units.sum()
q = df.query("units > 15 and store == 'east'")
assert (q.units > 15).all()
wide = by_store.reset_index().melt(id_vars="store", value_vars=["units", "orders"])
assert len(wide) == 8
csv_text = "a;b\n1;x\n2;\n"
small = pd.read_csv(io.StringIO(csv_text), sep=";")
assert small.b.isna().sum() == 1 and small.fillna("-").b.tolist() == ["x", "-"]
small.to_json(work / "small.json", orient="records")
assert pd.read_json(work / "small.json").a.tolist() == [1, 2]
desc = df.describe()
assert "revenue" in desc.columns and desc.loc["count", "units"] == n
print("OK pandas_csv_groupby")
