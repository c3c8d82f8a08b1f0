#!/usr/bin/env python3
"""Export 17 torchvision architectures (random weights, seed 0) with both of torch's ONNX exporters: the TorchScript one
(opset 17) and the dynamo one (`torch.export`, opset 18+): classifiers (MobileNetV3, EfficientNet, RegNet, ConvNeXt,
DenseNet, Inception-v3, GoogLeNet, ShuffleNetV2, SqueezeNet, MNASNet, MaxViT, Swin-V2, ViT-B/16), segmenters
(LR-ASPP, DeepLabV3, FCN) and a video net (R3D-18); S3D does not export at 112² and is reported as FAIL.

usage: python3 scripts/export-torchvision.py OUT_DIR [NAME ...]   then: python3 scripts/real_models.py OUT_DIR
needs: pip install torch torchvision onnx onnxscript   (PyPI's CUDA wheel runs on the CPU)
"""
import sys, os, traceback, torch, torchvision
from torchvision import models as M
torch.manual_seed(0)
out = sys.argv[1]
which = sys.argv[2:] 
zoo = {
 'mobilenet_v3_small': (lambda: M.mobilenet_v3_small(), (1,3,224,224)),
 'efficientnet_b0': (lambda: M.efficientnet_b0(), (1,3,224,224)),
 'regnet_y_400mf': (lambda: M.regnet_y_400mf(), (1,3,224,224)),
 'convnext_tiny': (lambda: M.convnext_tiny(), (1,3,224,224)),
 'densenet121': (lambda: M.densenet121(), (1,3,224,224)),
 'inception_v3': (lambda: M.inception_v3(init_weights=True, aux_logits=False), (1,3,299,299)),
 'googlenet': (lambda: M.googlenet(init_weights=True, aux_logits=False), (1,3,224,224)),
 'shufflenet_v2': (lambda: M.shufflenet_v2_x1_0(), (1,3,224,224)),
 'squeezenet': (lambda: M.squeezenet1_1(), (1,3,224,224)),
 'mnasnet': (lambda: M.mnasnet0_5(), (1,3,224,224)),
 'maxvit_t': (lambda: M.maxvit_t(), (1,3,224,224)),
 'swin_v2_t': (lambda: M.swin_v2_t(), (1,3,256,256)),
 'vit_b_16': (lambda: M.vit_b_16(), (1,3,224,224)),
 'lraspp': (lambda: M.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None), (1,3,224,224)),
 'deeplabv3_mbv3': (lambda: M.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=False), (1,3,224,224)),
 'fcn_r50': (lambda: M.segmentation.fcn_resnet50(weights=None, weights_backbone=None, aux_loss=False), (1,3,224,224)),
 'r3d_18': (lambda: M.video.r3d_18(), (1,3,8,112,112)),
 's3d': (lambda: M.video.s3d(), (1,3,16,112,112)),
}
for name in (which or zoo):
    f, shape = zoo[name]
    for exporter in ('ts', 'dynamo'):
        path = os.path.join(out, f'{name}_{exporter}.onnx')
        if os.path.exists(path): continue
        try:
            m = f().eval()
            x = torch.randn(*shape)
            if exporter == 'ts':
                torch.onnx.export(m, (x,), path, opset_version=17, dynamo=False, input_names=['input'], output_names=['output'])
            else:
                torch.onnx.export(m, (x,), path, dynamo=True, input_names=['input'], external_data=False)
            print('ok', name, exporter, flush=True)
        except Exception as e:
            print('FAIL', name, exporter, repr(e)[:200], flush=True)
