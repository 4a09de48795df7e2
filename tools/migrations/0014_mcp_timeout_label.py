import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tools", "0013_labels_2"),
    ]

    operations = [
        migrations.AlterField(
            model_name="mcpserver",
            name="timeout_seconds",
            field=models.PositiveIntegerField(
                default=30,
                help_text="The longest a tool call or a discovery may take, in all.",
                validators=[
                    django.core.validators.MinValueValidator(1),
                    django.core.validators.MaxValueValidator(120),
                ],
                verbose_name="timeout (seconds)",
            ),
        ),
    ]
