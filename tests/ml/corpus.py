"""Classic-ML test corpus, trained in the test process on scikit-learn's bundled datasets (no downloads) and
converted with skl2onnx / onnxmltools as a user would. `model(name)` → (ONNX bytes, float32 inputs X)."""

import functools
import warnings

import numpy as np

ML_OPSET = {"": 17, "ai.onnx.ml": 3}


@functools.lru_cache(maxsize=None)
def data(which: str):
    from sklearn import datasets
    loader = {"iris": datasets.load_iris, "cancer": datasets.load_breast_cancer, "diabetes": datasets.load_diabetes}
    x, y = loader[which](return_X_y=True)
    return x.astype(np.float32), y


def _skl(est, which, **opts):
    from sklearn.base import is_classifier
    from skl2onnx import to_onnx
    x, y = data(which)
    est.fit(x, y)
    options = {"zipmap": False} if is_classifier(est) else None
    return to_onnx(est, x[:1], options=options, target_opset=dict(ML_OPSET), **opts).SerializeToString(), x


def _lightgbm(which, n_estimators):
    import lightgbm
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType
    x, y = data(which)
    cls = lightgbm.LGBMClassifier if which != "diabetes" else lightgbm.LGBMRegressor
    est = cls(n_estimators=n_estimators, num_leaves=15, verbose=-1, random_state=0).fit(x, y)
    onx = convert_lightgbm(est, initial_types=[("X", FloatTensorType([None, x.shape[1]]))], zipmap=False,
                           target_opset=15)
    return onx.SerializeToString(), x


def build(name: str):
    from sklearn.decomposition import PCA
    from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor, RandomForestClassifier,
                                  RandomForestRegressor)
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC, SVR, LinearSVR
    makers = {
        "rf100_iris": lambda: _skl(RandomForestClassifier(n_estimators=100, max_depth=8, random_state=0), "iris"),
        "rf_cancer_binary": lambda: _skl(RandomForestClassifier(n_estimators=30, random_state=0), "cancer"),
        "gb_iris": lambda: _skl(GradientBoostingClassifier(n_estimators=30, random_state=0), "iris"),
        "gb_cancer_binary": lambda: _skl(GradientBoostingClassifier(n_estimators=50, random_state=0), "cancer"),
        "rf_regressor": lambda: _skl(RandomForestRegressor(n_estimators=20, max_depth=6, random_state=0), "diabetes"),
        "gb_regressor": lambda: _skl(GradientBoostingRegressor(n_estimators=50, random_state=0), "diabetes"),
        "lightgbm_iris": lambda: _lightgbm("iris", 30),
        "lightgbm_cancer": lambda: _lightgbm("cancer", 30),
        "lightgbm_regressor": lambda: _lightgbm("diabetes", 30),
        "scaler_logreg": lambda: _skl(make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), "iris"),
        "scaler_logreg_binary": lambda: _skl(make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
                                             "cancer"),
        "pca_svc": lambda: _skl(make_pipeline(PCA(n_components=3), SVC()), "iris"),
        "svc_poly_binary": lambda: _skl(make_pipeline(StandardScaler(), SVC(kernel="poly", degree=2)), "cancer"),
        "linear_regression": lambda: _skl(LinearRegression(), "diabetes"),
        "svr_rbf": lambda: _skl(SVR(), "diabetes"),
        "linear_svr": lambda: _skl(LinearSVR(max_iter=5000), "diabetes"),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return makers[name]()


NAMES = ["rf100_iris", "rf_cancer_binary", "gb_iris", "gb_cancer_binary", "rf_regressor", "gb_regressor",
         "lightgbm_iris", "lightgbm_cancer", "lightgbm_regressor", "scaler_logreg", "scaler_logreg_binary", "pca_svc",
         "svc_poly_binary", "linear_regression", "svr_rbf", "linear_svr"]
model = functools.lru_cache(maxsize=None)(build)
