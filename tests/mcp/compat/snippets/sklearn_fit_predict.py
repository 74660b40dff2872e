# scikit-learn: a pipeline fitted and scored, a forest with n_jobs=2, cross-validation
# and a grid search in two loky worker processes (n_jobs=2). joblib must not fall back to
# "serial mode" (it does, with a warning, where it cannot make semaphores).
import warnings

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import joblib
    import numpy as np
    from sklearn.datasets import make_classification, make_regression
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.metrics import accuracy_score, r2_score
    from sklearn.model_selection import GridSearchCV, cross_val_score, train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = make_classification(n_samples=600, n_features=12, n_informative=6, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    pipe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))
    pipe.fit(X_train, y_train)
    acc = accuracy_score(y_test, pipe.predict(X_test))
    assert acc > 0.75, acc
    assert pipe.predict_proba(X_test[:3]).shape == (3, 2)

    forest = RandomForestClassifier(n_estimators=40, n_jobs=2, random_state=0).fit(X_train, y_train)
    assert forest.score(X_test, y_test) > 0.75
    scores = cross_val_score(forest, X, y, cv=4, n_jobs=2)
    assert len(scores) == 4 and scores.mean() > 0.75, scores
    grid = GridSearchCV(LogisticRegression(max_iter=500), {"C": [0.1, 1.0, 10.0]}, cv=3, n_jobs=2)
    grid.fit(X_train, y_train)
    assert grid.best_params_["C"] in (0.1, 1.0, 10.0) and grid.best_score_ > 0.75

    Xr, yr = make_regression(n_samples=300, n_features=5, noise=0.1, random_state=0)
    assert r2_score(yr, Ridge(alpha=0.1).fit(Xr, yr).predict(Xr)) > 0.99

for w in caught:
    print("warning:", w.category.__name__, str(w.message)[:200])
serial = [str(w.message) for w in caught if "serial mode" in str(w.message)]
assert not serial, f"joblib fell back to serial mode: {serial}"
assert joblib.effective_n_jobs(2) == 2, "joblib runs serially here"
print("OK sklearn_fit_predict")
