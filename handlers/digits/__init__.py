"""The digits image classifier's serving code: the image kit (handlers/kits/image/) under its
name. `SPEC` is its one hook (handlers/spec.py)."""

from handlers.digits.model import DigitsModel
from handlers.digits.settings import DigitsSettings
from handlers.kits import image
from handlers.kits.image import oip
from handlers.spec import ModelSpec

SPEC = ModelSpec("digits", model=DigitsModel, settings=DigitsSettings, kit=image, contract=oip)
