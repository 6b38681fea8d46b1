from django.apps import AppConfig


class HitlConfig(AppConfig):
    name = "hitl"
    verbose_name = "Human in the loop"
    default_auto_field = "django.db.models.BigAutoField"
