"""Vision models: classification, detection, segmentation, image-to-image.

Every builder takes a seed and returns an uncalibrated Keras model with random weights (``weights=None``, no
downloads); inputs have a free batch dimension so calibration can feed a batch.  Sizes are kept small (at most
~2M parameters, inputs of 96x96 or less) so the whole zoo converts and runs in minutes.
"""

from __future__ import annotations

from typing import Any

from .core import seeded_keras


# ------------------------------------------------------------------------------------------------ blocks
def _conv_bn(keras: Any, x: Any, filters: int, k: int | tuple[int, int] = 3, s: int = 1, act: str | None = "relu",
             dilation: int = 1, use_bn: bool = True) -> Any:
    L = keras.layers
    x = L.Conv2D(filters, k, strides=s, padding="same", dilation_rate=dilation, use_bias=not use_bn)(x)
    if use_bn:
        x = L.BatchNormalization()(x)
    return _act(keras, x, act)


def _act(keras: Any, x: Any, act: str | None) -> Any:
    L = keras.layers
    if act is None:
        return x
    if act == "relu6":
        return L.ReLU(6.0)(x)
    if act == "leaky":
        return L.LeakyReLU(negative_slope=0.1)(x)
    return L.Activation(act)(x)


def _dw_bn(keras: Any, x: Any, k: int = 3, s: int = 1, act: str | None = "relu", dilation: int = 1) -> Any:
    L = keras.layers
    x = L.DepthwiseConv2D(k, strides=s, padding="same", dilation_rate=dilation, use_bias=False)(x)
    x = L.BatchNormalization()(x)
    return _act(keras, x, act)


def _classifier(keras: Any, x: Any, classes: int) -> Any:
    L = keras.layers
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(classes)(x)
    return L.Softmax()(x)


# ------------------------------------------------------------------------------------------------ classification
def mobilenet_v1(seed: int) -> Any:
    """Keras MobileNet (V1), width 0.25 at 96x96, 100 classes (1x1-conv classifier)."""
    keras = seeded_keras(seed)
    return keras.applications.MobileNet(input_shape=(96, 96, 3), alpha=0.25, weights=None, classes=100,
                                        dropout=0.0)


def mobilenet_v2(seed: int) -> Any:
    """Keras MobileNetV2, width 0.35 at 96x96, 100 classes."""
    keras = seeded_keras(seed)
    return keras.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None, classes=100)


def mobilenet_v3_small(seed: int) -> Any:
    """Keras MobileNetV3Small (hard-swish, squeeze-excite), width 0.75 at 96x96, 100 classes."""
    keras = seeded_keras(seed)
    return keras.applications.MobileNetV3Small(input_shape=(96, 96, 3), alpha=0.75, weights=None, classes=100,
                                               include_preprocessing=False, dropout_rate=0.0)


def mobilenet_v3_small_minimalistic(seed: int) -> Any:
    """Keras MobileNetV3Small, minimalistic (ReLU, 3x3 kernels, no squeeze-excite), at 96x96."""
    keras = seeded_keras(seed)
    return keras.applications.MobileNetV3Small(input_shape=(96, 96, 3), alpha=1.0, minimalistic=True,
                                               weights=None, classes=100, include_preprocessing=False,
                                               dropout_rate=0.0)


def efficientnet_lite(seed: int) -> Any:
    """EfficientNet-lite-style: MBConv blocks (expand, depthwise 3x3/5x5, project), ReLU6, no squeeze-excite."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((96, 96, 3), name="image")
    x = _conv_bn(keras, inp, 16, 3, 2, "relu6")
    # (expansion, channels, repeats, stride, kernel)
    for t, c, n, s, k in ((1, 8, 1, 1, 3), (6, 16, 2, 2, 3), (6, 24, 2, 2, 5), (6, 40, 2, 2, 3), (6, 56, 1, 1, 5),
                          (6, 96, 2, 2, 5)):
        for i in range(n):
            stride = s if i == 0 else 1
            cin = int(x.shape[-1])
            y = _conv_bn(keras, x, cin * t, 1, 1, "relu6") if t != 1 else x
            y = _dw_bn(keras, y, k, stride, "relu6")
            y = _conv_bn(keras, y, c, 1, 1, None)
            x = L.Add()([x, y]) if stride == 1 and cin == c else y
    x = _conv_bn(keras, x, 320, 1, 1, "relu6")
    return keras.Model(inp, _classifier(keras, x, 100), name="efficientnet_lite")


def _basic_block(keras: Any, x: Any, filters: int, stride: int) -> Any:
    L = keras.layers
    y = _conv_bn(keras, x, filters, 3, stride, "relu")
    y = _conv_bn(keras, y, filters, 3, 1, None)
    if stride != 1 or int(x.shape[-1]) != filters:
        x = _conv_bn(keras, x, filters, 1, stride, None)
    return L.ReLU()(L.Add()([x, y]))


def resnet8(seed: int) -> Any:
    """MLPerf Tiny image classification ResNet-8 (CIFAR-10 sized, 32x32x3)."""
    keras = seeded_keras(seed)
    inp = keras.Input((32, 32, 3), name="image")
    x = _conv_bn(keras, inp, 16, 3, 1, "relu")
    for filters, stride in ((16, 1), (32, 2), (64, 2)):
        x = _basic_block(keras, x, filters, stride)
    return keras.Model(inp, _classifier(keras, x, 10), name="resnet8")


def resnet18_narrow(seed: int) -> Any:
    """ResNet-18 layout (7x7 stem, max-pool, 4 stages of 2 basic blocks) at quarter width, 64x64 input."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((64, 64, 3), name="image")
    x = _conv_bn(keras, inp, 16, 7, 2, "relu")
    x = L.MaxPooling2D(3, strides=2, padding="same")(x)
    for i, filters in enumerate((16, 32, 64, 128)):
        x = _basic_block(keras, x, filters, 1 if i == 0 else 2)
        x = _basic_block(keras, x, filters, 1)
    return keras.Model(inp, _classifier(keras, x, 100), name="resnet18_narrow")


def densenet_mini(seed: int) -> Any:
    """DenseNet-BC style: 3 dense blocks (BN-ReLU-1x1-BN-ReLU-3x3, growth 12, concatenation), transitions."""
    keras = seeded_keras(seed)
    L = keras.layers
    growth = 12
    inp = keras.Input((32, 32, 3), name="image")
    x = L.Conv2D(2 * growth, 3, padding="same", use_bias=False)(inp)
    for block in range(3):
        for _ in range(4):
            y = L.ReLU()(L.BatchNormalization()(x))
            y = L.Conv2D(4 * growth, 1, use_bias=False)(y)
            y = L.ReLU()(L.BatchNormalization()(y))
            y = L.Conv2D(growth, 3, padding="same", use_bias=False)(y)
            x = L.Concatenate()([x, y])
        if block < 2:
            x = L.ReLU()(L.BatchNormalization()(x))
            x = L.Conv2D(int(x.shape[-1]) // 2, 1, use_bias=False)(x)
            x = L.AveragePooling2D(2)(x)
    x = L.ReLU()(L.BatchNormalization()(x))
    return keras.Model(inp, _classifier(keras, x, 10), name="densenet_mini")


def squeezenet(seed: int) -> Any:
    """SqueezeNet 1.1 layout (fire modules: squeeze 1x1, expand 1x1 + 3x3 concatenated), 1x1-conv classifier."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((64, 64, 3), name="image")
    x = L.Conv2D(32, 3, strides=2, padding="same", activation="relu")(inp)
    x = L.MaxPooling2D(3, strides=2, padding="same")(x)

    def fire(x: Any, squeeze: int, expand: int) -> Any:
        s = L.Conv2D(squeeze, 1, activation="relu")(x)
        return L.Concatenate()([L.Conv2D(expand, 1, activation="relu")(s),
                                L.Conv2D(expand, 3, padding="same", activation="relu")(s)])

    x = fire(fire(x, 8, 32), 8, 32)
    x = L.MaxPooling2D(3, strides=2, padding="same")(x)
    x = fire(fire(x, 16, 64), 16, 64)
    x = L.MaxPooling2D(3, strides=2, padding="same")(x)
    x = fire(fire(x, 24, 96), 32, 128)
    x = L.Conv2D(100, 1)(x)
    x = L.GlobalAveragePooling2D()(x)
    return keras.Model(inp, L.Softmax()(x), name="squeezenet")


def shufflenet_v2_mini(seed: int) -> Any:
    """ShuffleNetV2-style units: channel split, 1x1-dw3x3-1x1 branch, concatenation, channel shuffle."""
    keras = seeded_keras(seed)
    L = keras.layers
    ops = keras.ops
    inp = keras.Input((64, 64, 3), name="image")
    x = _conv_bn(keras, inp, 24, 3, 2, "relu")
    x = L.MaxPooling2D(3, strides=2, padding="same")(x)

    def shuffle(x: Any) -> Any:
        h, w, c = (int(d) for d in x.shape[1:])
        x = L.Reshape((h, w, 2, c // 2))(x)
        x = L.Permute((1, 2, 4, 3))(x)
        return L.Reshape((h, w, c))(x)

    def branch(x: Any, c: int, s: int) -> Any:
        x = _conv_bn(keras, x, c, 1, 1, "relu")
        x = _dw_bn(keras, x, 3, s, None)
        return _conv_bn(keras, x, c, 1, 1, "relu")

    for c, n in ((48, 2), (96, 2)):
        half = c // 2
        left = _conv_bn(keras, _dw_bn(keras, x, 3, 2, None), half, 1, 1, "relu")
        x = shuffle(L.Concatenate()([left, branch(x, half, 2)]))
        for _ in range(n - 1):
            a, b = ops.split(x, 2, axis=-1)
            x = shuffle(L.Concatenate()([a, branch(b, half, 1)]))
    x = _conv_bn(keras, x, 256, 1, 1, "relu")
    return keras.Model(inp, _classifier(keras, x, 100), name="shufflenet_v2_mini")


def lenet5(seed: int) -> Any:
    """LeNet-5 on 28x28x1: tanh convolutions, average pooling, dense layers."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((28, 28, 1), name="image")
    x = L.Conv2D(6, 5, padding="same", activation="tanh")(inp)
    x = L.AveragePooling2D(2)(x)
    x = L.Conv2D(16, 5, activation="tanh")(x)
    x = L.AveragePooling2D(2)(x)
    x = L.Flatten()(x)
    x = L.Dense(120, activation="tanh")(x)
    x = L.Dense(84, activation="tanh")(x)
    x = L.Dense(10)(x)
    return keras.Model(inp, L.Softmax()(x), name="lenet5")


# ------------------------------------------------------------------------------------------------ detection
def ssd_lite(seed: int) -> Any:
    """SSD-lite style: depthwise-separable backbone, box and class heads on three scales, concatenated.

    Outputs ``boxes`` [1, N, 4] and ``scores`` [1, N, 6] (softmax over 5 classes and background).
    """
    keras = seeded_keras(seed)
    L = keras.layers
    classes, anchors = 6, 3
    inp = keras.Input((96, 96, 3), name="image")
    x = _conv_bn(keras, inp, 16, 3, 2, "relu6")
    feats: list[Any] = []
    for c, s in ((24, 2), (32, 1), (48, 2), (64, 1), (96, 2), (128, 2)):
        x = _dw_bn(keras, x, 3, s, "relu6")
        x = _conv_bn(keras, x, c, 1, 1, "relu6")
        if int(x.shape[1]) in (12, 6, 3) and (not feats or int(feats[-1].shape[1]) != int(x.shape[1])):
            feats.append(x)
    boxes, scores = [], []
    for f in feats:
        b = L.SeparableConv2D(anchors * 4, 3, padding="same")(f)
        c = L.SeparableConv2D(anchors * classes, 3, padding="same")(f)
        boxes.append(L.Reshape((-1, 4))(b))
        scores.append(L.Reshape((-1, classes))(c))
    box = L.Concatenate(axis=1, name="boxes")(boxes)
    score = L.Softmax(name="scores")(L.Concatenate(axis=1)(scores))
    return keras.Model(inp, [box, score], name="ssd_lite")


def yolo_tiny(seed: int) -> Any:
    """Tiny-YOLO style: conv-BN-leaky-ReLU with max-pooling, two detection heads (8x8 and 4x4), a nearest-neighbour
    resize (RESIZE_NEAREST_NEIGHBOR) and a route concatenation."""
    keras = seeded_keras(seed)
    L = keras.layers
    out_ch = 3 * (5 + 4)
    inp = keras.Input((64, 64, 3), name="image")
    x = inp
    for c in (8, 16, 32):
        x = _conv_bn(keras, x, c, 3, 1, "leaky")
        x = L.MaxPooling2D(2)(x)
    route = _conv_bn(keras, x, 64, 3, 1, "leaky")
    x = L.MaxPooling2D(2)(route)
    x = _conv_bn(keras, x, 128, 3, 1, "leaky")
    x = _conv_bn(keras, x, 64, 1, 1, "leaky")
    head1 = L.Conv2D(out_ch, 1, name="head_4x4")(_conv_bn(keras, x, 128, 3, 1, "leaky"))
    y = _conv_bn(keras, x, 32, 1, 1, "leaky")
    y = L.Resizing(int(y.shape[1]) * 2, int(y.shape[2]) * 2, interpolation="nearest")(y)
    y = L.Concatenate()([y, route])
    head2 = L.Conv2D(out_ch, 1, name="head_8x8")(_conv_bn(keras, y, 64, 3, 1, "leaky"))
    return keras.Model(inp, [head1, head2], name="yolo_tiny")


# ------------------------------------------------------------------------------------------------ segmentation
def unet(seed: int) -> Any:
    """UNet: three encoder levels (conv-BN-ReLU x2, max-pool), transposed-conv decoder with skip concatenations."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((64, 64, 3), name="image")
    x = inp
    skips = []
    for c in (16, 32, 64):
        x = _conv_bn(keras, _conv_bn(keras, x, c), c)
        skips.append(x)
        x = L.MaxPooling2D(2)(x)
    x = _conv_bn(keras, _conv_bn(keras, x, 128), 128)
    for c, skip in zip((64, 32, 16), reversed(skips)):
        x = L.Conv2DTranspose(c, 2, strides=2, padding="same")(x)
        x = L.Concatenate()([x, skip])
        x = _conv_bn(keras, _conv_bn(keras, x, c), c)
    x = L.Conv2D(4, 1)(x)
    return keras.Model(inp, L.Softmax()(x), name="unet")


def deeplab_v3_mini(seed: int) -> Any:
    """DeepLabV3-style: MobileNet-ish backbone with an atrous last stage, ASPP (1x1, rates 2/4/6, image pooling),
    bilinear resizes back to the input resolution."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((64, 64, 3), name="image")
    x = _conv_bn(keras, inp, 16, 3, 2, "relu")
    for c, s in ((24, 2), (32, 1), (48, 2)):
        x = _dw_bn(keras, x, 3, s)
        x = _conv_bn(keras, x, c, 1)
    low = x
    x = _dw_bn(keras, x, 3, 1, dilation=2)
    x = _conv_bn(keras, x, 64, 1)
    h, w = int(x.shape[1]), int(x.shape[2])
    branches = [_conv_bn(keras, x, 32, 1)]
    for rate in (2, 4, 6):
        branches.append(_conv_bn(keras, x, 32, 3, dilation=rate))
    pooled = L.GlobalAveragePooling2D(keepdims=True)(x)
    pooled = _conv_bn(keras, pooled, 32, 1)
    branches.append(L.UpSampling2D((h, w), interpolation="bilinear")(pooled))
    x = _conv_bn(keras, L.Concatenate()(branches), 48, 1)
    x = L.Concatenate()([x, _conv_bn(keras, low, 16, 1)])
    x = L.Conv2D(5, 1)(x)
    x = L.Resizing(64, 64, interpolation="bilinear")(x)
    return keras.Model(inp, L.Softmax()(x), name="deeplab_v3_mini")


# ------------------------------------------------------------------------------------------------ image-to-image
def conv_autoencoder(seed: int) -> Any:
    """Convolutional autoencoder: strided convolutions down, transposed convolutions up, sigmoid output."""
    keras = seeded_keras(seed)
    L = keras.layers
    inp = keras.Input((32, 32, 1), name="image")
    x = L.Conv2D(16, 3, strides=2, padding="same", activation="relu")(inp)
    x = L.Conv2D(32, 3, strides=2, padding="same", activation="relu")(x)
    x = L.Conv2D(8, 1, activation="relu")(x)
    x = L.Conv2DTranspose(32, 3, strides=2, padding="same", activation="relu")(x)
    x = L.Conv2DTranspose(16, 3, strides=2, padding="same", activation="relu")(x)
    x = L.Conv2D(1, 3, padding="same", activation="sigmoid")(x)
    return keras.Model(inp, x, name="conv_autoencoder")


def espcn_x2(seed: int) -> Any:
    """ESPCN super-resolution x2: tanh convolutions and a sub-pixel (depth_to_space) upscale."""
    keras = seeded_keras(seed)
    L = keras.layers
    tf = __import__("tensorflow")
    inp = keras.Input((32, 32, 1), name="image")
    x = L.Conv2D(32, 5, padding="same", activation="tanh")(inp)
    x = L.Conv2D(16, 3, padding="same", activation="tanh")(x)
    x = L.Conv2D(4, 3, padding="same")(x)
    x = L.Lambda(lambda t: tf.nn.depth_to_space(t, 2), output_shape=(64, 64, 1))(x)
    return keras.Model(inp, x, name="espcn_x2")
